#include "deepinfer/kv/redis_index.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <charconv>
#include <utility>

namespace deepinfer::kv {

struct RedisIndex::Reply {
  struct Free {
    void operator()(redisReply* reply) const { freeReplyObject(reply); }
  };
  std::unique_ptr<redisReply, Free> ptr;
};

namespace {

constexpr std::string_view kFlag = "--kv-cluster-redis";
constexpr int kDefaultPort = 6379;

struct Endpoint {
  std::string host;
  int port = kDefaultPort;
};

StatusOr<Endpoint> parse_url(const std::string& url) {
  auto bad = [&](std::string_view why) {
    return invalid_argument(std::string(kFlag) + " '" + url + "': " + std::string(why) +
                            " (expected redis://host:port)");
  };
  constexpr std::string_view kScheme = "redis://";
  std::string_view rest = url;
  if (!rest.starts_with(kScheme)) return bad("not a redis:// URL");
  rest.remove_prefix(kScheme.size());
  if (rest.find_first_of("@/?#") != std::string_view::npos)
    return bad("credentials, a database number or options are not supported");
  Endpoint endpoint;
  std::optional<std::string_view> port_text;
  if (rest.starts_with('[')) {  // an IPv6 literal
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unterminated '['");
    endpoint.host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest[0] != ':') return bad("junk after ']'");
    if (!rest.empty()) port_text = rest.substr(1);
  } else {
    const size_t colon = rest.find(':');
    endpoint.host = rest.substr(0, colon);
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (endpoint.host.empty()) return bad("no host");
  if (port_text) {
    const char* end = port_text->data() + port_text->size();
    auto [ptr, ec] = std::from_chars(port_text->data(), end, endpoint.port);
    if (port_text->empty() || ec != std::errc() || ptr != end || endpoint.port < 1 ||
        endpoint.port > 65535)
      return bad("the port must be a number in 1..65535");
  }
  return endpoint;
}

timeval to_timeval(int ms) { return {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}; }

// hiredis sends with write(2): on a socket whose peer has gone that raises SIGPIPE, which kills
// the process by default. Block it on this thread for the call and swallow one we caused, leaving
// the process's signal handling alone.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_mask_);
  }
  ~SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec no_wait{};
      sigtimedwait(&pipe_, nullptr, &no_wait);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_, old_mask_;
  bool was_pending_ = false;
};

Status positive_ttl(int64_t ttl_seconds) {
  if (ttl_seconds > 0) return ok_status();
  return invalid_argument("ttl_seconds must be positive, got " + std::to_string(ttl_seconds));
}

// An error reply or one of an unexpected type; the connection itself is fine.
Status expect_type(const redisReply* reply, int type, std::string_view command,
                   const std::string& address) {
  if (reply->type == type) return ok_status();
  const std::string what = reply->type == REDIS_REPLY_ERROR
                               ? std::string(reply->str, reply->len)
                               : "unexpected reply type " + std::to_string(reply->type);
  return internal_error("cluster index Redis at " + address + ": " + std::string(command) + ": " +
                        what);
}

}  // namespace

StatusOr<std::unique_ptr<RedisIndex>> RedisIndex::connect(RedisIndexOptions options) {
  ASSIGN_OR_RETURN(Endpoint endpoint, parse_url(options.url));
  if (options.key_prefix.empty())
    return invalid_argument("key_prefix must not be empty (it separates model fingerprints)");
  for (auto [name, value] : {std::pair{"connect_timeout_ms", options.connect_timeout_ms},
                             std::pair{"command_timeout_ms", options.command_timeout_ms}}) {
    if (value <= 0)
      return invalid_argument(std::string(name) + " must be positive, got " +
                              std::to_string(value));
  }
  if (options.reconnect_interval_ms < 0)
    return invalid_argument("reconnect_interval_ms must not be negative, got " +
                            std::to_string(options.reconnect_interval_ms));

  std::unique_ptr<RedisIndex> index(
      new RedisIndex(std::move(options), std::move(endpoint.host), endpoint.port));
  {
    std::lock_guard lock(index->mu_);
    index->last_attempt_ = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(index->open_locked());
  }
  // extend() relies on EXPIRE ... GT (Redis 7.0); refuse an older server at startup rather than
  // fail every extend later.
  ASSIGN_OR_RETURN(Reply info, index->run({"INFO", "server"}));
  RETURN_IF_ERROR(expect_type(info.ptr.get(), REDIS_REPLY_STRING, "INFO", index->address_));
  const std::string_view text(info.ptr->str, info.ptr->len);
  constexpr std::string_view kField = "redis_version:";
  const size_t at = text.find(kField);
  int major = 0;
  if (at != std::string_view::npos) {
    const char* begin = text.data() + at + kField.size();
    std::from_chars(begin, text.data() + text.size(), major);
  }
  if (major < 7) {
    const std::string seen = at == std::string_view::npos
                                 ? "no redis_version"
                                 : "major version " + std::to_string(major);
    return failed_precondition("cluster index Redis at " + index->address_ + " (" +
                               std::string(kFlag) + "): INFO reports " + seen +
                               "; extend needs Redis 7.0 or newer (EXPIRE ... GT)");
  }
  return index;
}

RedisIndex::RedisIndex(RedisIndexOptions options, std::string host, int port)
    : options_(std::move(options)),
      host_(std::move(host)),
      port_(port),
      address_(host_.find(':') == std::string::npos ? host_ + ":" + std::to_string(port_)
                                                    : "[" + host_ + "]:" + std::to_string(port_)) {}

RedisIndex::~RedisIndex() {
  if (context_ != nullptr) redisFree(context_);
}

Status RedisIndex::open_locked() {
  redisContext* context =
      redisConnectWithTimeout(host_.c_str(), port_, to_timeval(options_.connect_timeout_ms));
  std::string error;
  if (context == nullptr) {
    error = "out of memory for a hiredis context";
  } else if (context->err != 0) {
    error = context->errstr;
  } else if (redisSetTimeout(context, to_timeval(options_.command_timeout_ms)) != REDIS_OK) {
    error = "setting the command timeout: " + std::string(context->errstr);
  }
  if (!error.empty()) {
    if (context != nullptr) redisFree(context);
    last_error_ = error;
    return failed_precondition("cluster index Redis at " + address_ + " (" + std::string(kFlag) +
                               "): cannot connect: " + error);
  }
  context_ = context;
  connected_.store(true);
  return ok_status();
}

Status RedisIndex::drop_locked(const std::string& why) {
  redisFree(context_);
  context_ = nullptr;
  connected_.store(false);
  last_error_ = why;
  return failed_precondition("cluster index Redis at " + address_ + ": " + why +
                             " (connection dropped; a later call reconnects)");
}

StatusOr<std::vector<RedisIndex::Reply>> RedisIndex::round_trip(
    std::span<const std::vector<std::string>> commands) {
  std::lock_guard lock(mu_);
  SigpipeGuard no_sigpipe;
  if (context_ == nullptr) {
    const auto now = std::chrono::steady_clock::now();
    const auto interval = std::chrono::milliseconds(options_.reconnect_interval_ms);
    if (now - last_attempt_ < interval)
      return failed_precondition("cluster index Redis at " + address_ + " is unavailable (" +
                                 last_error_ + "); the next reconnect is at most " +
                                 std::to_string(options_.reconnect_interval_ms) + " ms away");
    last_attempt_ = now;
    RETURN_IF_ERROR(open_locked());
    reconnects_.fetch_add(1);
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& command : commands) {
    argv.clear();
    lengths.clear();
    for (const auto& arg : command) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK)
      return drop_locked("queueing a command: " + std::string(context_->errstr));
  }
  std::vector<Reply> replies(commands.size());
  for (Reply& reply : replies) {
    void* raw = nullptr;
    const int status = redisGetReply(context_, &raw);
    const int saved_errno = errno;
    if (status != REDIS_OK || raw == nullptr) {
      const bool timed_out =
          context_->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
      return drop_locked(timed_out ? "no reply within command_timeout_ms=" +
                                         std::to_string(options_.command_timeout_ms)
                                   : std::string(context_->errstr));
    }
    reply.ptr.reset(static_cast<redisReply*>(raw));
  }
  return replies;
}

StatusOr<RedisIndex::Reply> RedisIndex::run(std::vector<std::string> command) {
  ASSIGN_OR_RETURN(std::vector<Reply> replies,
                   round_trip(std::span<const std::vector<std::string>>(&command, 1)));
  return std::move(replies[0]);
}

Status RedisIndex::put(std::string_view key_hex, std::string_view value, int64_t ttl_seconds) {
  ops_.fetch_add(1);
  return tally([&]() -> Status {
    RETURN_IF_ERROR(positive_ttl(ttl_seconds));
    ASSIGN_OR_RETURN(Reply reply, run({"SET", key(key_hex), std::string(value), "EX",
                                       std::to_string(ttl_seconds)}));
    return expect_type(reply.ptr.get(), REDIS_REPLY_STATUS, "SET", address_);
  }());
}

StatusOr<std::optional<std::string>> RedisIndex::get(std::string_view key_hex) {
  ops_.fetch_add(1);
  return tally([&]() -> StatusOr<std::optional<std::string>> {
    ASSIGN_OR_RETURN(Reply reply, run({"GET", key(key_hex)}));
    if (reply.ptr->type == REDIS_REPLY_NIL) return std::optional<std::string>();
    RETURN_IF_ERROR(expect_type(reply.ptr.get(), REDIS_REPLY_STRING, "GET", address_));
    return std::optional<std::string>(std::in_place, reply.ptr->str, reply.ptr->len);
  }());
}

StatusOr<std::vector<bool>> RedisIndex::exists_many(std::span<const std::string> keys_hex) {
  ops_.fetch_add(1);
  return tally([&]() -> StatusOr<std::vector<bool>> {
    if (keys_hex.empty()) return std::vector<bool>();
    std::vector<std::vector<std::string>> commands;
    commands.reserve(keys_hex.size());
    for (const std::string& key_hex : keys_hex) commands.push_back({"EXISTS", key(key_hex)});
    ASSIGN_OR_RETURN(std::vector<Reply> replies, round_trip(commands));
    std::vector<bool> exists(replies.size());
    for (size_t i = 0; i < replies.size(); ++i) {
      RETURN_IF_ERROR(expect_type(replies[i].ptr.get(), REDIS_REPLY_INTEGER, "EXISTS", address_));
      exists[i] = replies[i].ptr->integer != 0;
    }
    return exists;
  }());
}

Status RedisIndex::extend(std::string_view key_hex, int64_t ttl_seconds) {
  ops_.fetch_add(1);
  return tally([&]() -> Status {
    RETURN_IF_ERROR(positive_ttl(ttl_seconds));
    ASSIGN_OR_RETURN(Reply reply, run({"EXPIRE", key(key_hex), std::to_string(ttl_seconds), "GT"}));
    return expect_type(reply.ptr.get(), REDIS_REPLY_INTEGER, "EXPIRE", address_);
  }());
}

Status RedisIndex::erase(std::string_view key_hex) {
  ops_.fetch_add(1);
  return tally([&]() -> Status {
    ASSIGN_OR_RETURN(Reply reply, run({"DEL", key(key_hex)}));
    return expect_type(reply.ptr.get(), REDIS_REPLY_INTEGER, "DEL", address_);
  }());
}

StatusOr<std::optional<int64_t>> RedisIndex::ttl(std::string_view key_hex) {
  ops_.fetch_add(1);
  return tally([&]() -> StatusOr<std::optional<int64_t>> {
    ASSIGN_OR_RETURN(Reply reply, run({"TTL", key(key_hex)}));
    RETURN_IF_ERROR(expect_type(reply.ptr.get(), REDIS_REPLY_INTEGER, "TTL", address_));
    if (reply.ptr->integer == -2) return std::optional<int64_t>();  // no such key
    return std::optional<int64_t>(reply.ptr->integer);
  }());
}

RedisIndexStats RedisIndex::stats() const {
  return {.ops = ops_.load(), .errors = errors_.load(), .reconnects = reconnects_.load()};
}

}  // namespace deepinfer::kv
