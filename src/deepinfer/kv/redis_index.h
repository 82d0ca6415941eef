// The cluster tier's index: which prefix-cache units exist cluster-wide, kept in Redis so every
// replica sees what any replica stored. The units' bytes live as files on a shared filesystem
// (another component); Redis holds only small values under key_prefix + unit key hex, and its
// native key expiry carries the retention. The index is a cache: a lost or unreachable Redis
// means misses, never wrong data, so every operation returns a Status and none outlives the
// command timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"

struct redisContext;  // hiredis, kept out of this header

namespace deepinfer::kv {

struct RedisIndexOptions {
  std::string url;         // --kv-cluster-redis: "redis://host:port" (port defaults to 6379)
  std::string key_prefix;  // e.g. "deepinfer:kv:<first 16 hex digits of the fingerprint>:"
  int connect_timeout_ms = 200;
  int command_timeout_ms = 200;
  // At most one connect attempt per interval, so a dead Redis costs each request nothing.
  int reconnect_interval_ms = 1000;
};

struct RedisIndexStats {
  int64_t ops = 0;         // operations called
  int64_t errors = 0;      // operations that returned an error
  int64_t reconnects = 0;  // connections re-established after a loss
};

class RedisIndex {
 public:
  // invalid_argument naming --kv-cluster-redis for a malformed url, or the field for a bad
  // timeout or an empty key_prefix; failed_precondition naming the address when the first
  // connect fails or the server is older than Redis 7.0 (extend needs EXPIRE ... GT).
  static StatusOr<std::unique_ptr<RedisIndex>> connect(RedisIndexOptions options);
  ~RedisIndex();
  RedisIndex(const RedisIndex&) = delete;
  RedisIndex& operator=(const RedisIndex&) = delete;

  // Errors: failed_precondition naming the address when the connection is down (it is dropped
  // and retried by a later call, at most once per reconnect_interval_ms); internal for an error
  // reply; invalid_argument for a non-positive ttl.

  // SET key value EX ttl_seconds.
  Status put(std::string_view key_hex, std::string_view value, int64_t ttl_seconds);
  // nullopt when the key does not exist (or has expired).
  StatusOr<std::optional<std::string>> get(std::string_view key_hex);
  // Whether each key exists, in one pipelined round trip (a chain's longest-prefix lookup).
  StatusOr<std::vector<bool>> exists_many(std::span<const std::string> keys_hex);
  // Sets the key to expire in ttl_seconds unless it already expires later (EXPIRE ... GT): an
  // agent hit (3 days) never shortens a chat unit's 7. No-op for a missing key.
  Status extend(std::string_view key_hex, int64_t ttl_seconds);
  Status erase(std::string_view key_hex);
  // Seconds until the key expires; nullopt when it does not exist, -1 when it never expires.
  StatusOr<std::optional<int64_t>> ttl(std::string_view key_hex);

  // Whether a connection is up (as of the last operation); never blocks on one in flight.
  bool healthy() const { return connected_.load(); }
  RedisIndexStats stats() const;
  const std::string& address() const { return address_; }  // "host:port"

 private:
  struct Reply;
  RedisIndex(RedisIndexOptions options, std::string host, int port);

  // Connects if needed (throttled), then sends `commands` pipelined and reads every reply.
  StatusOr<std::vector<Reply>> round_trip(std::span<const std::vector<std::string>> commands);
  StatusOr<Reply> run(std::vector<std::string> command);
  Status open_locked();
  Status drop_locked(const std::string& why);
  // Counts an operation's outcome for stats().
  template <typename Result>
  Result tally(Result result) {
    if (!result.ok()) errors_.fetch_add(1);
    return result;
  }
  std::string key(std::string_view key_hex) const {
    return options_.key_prefix + std::string(key_hex);
  }

  const RedisIndexOptions options_;
  const std::string host_;
  const int port_;
  const std::string address_;

  std::mutex mu_;  // guards context_ and the reconnect state
  redisContext* context_ = nullptr;
  std::chrono::steady_clock::time_point last_attempt_{};  // of a connect
  std::string last_error_;

  std::atomic<bool> connected_{false};
  std::atomic<int64_t> ops_{0}, errors_{0}, reconnects_{0};
};

}  // namespace deepinfer::kv
