// The prefix cache's tiers below the device: host memory (always), a local disk directory
// (--kv-disk-dir) and a cluster tier (--kv-cluster-dir: unit files on a shared filesystem, with
// --kv-cluster-redis as the cluster-wide index whose key expiry carries the retention). Stores
// are write-through: put() keeps the unit in host memory at once and hands it to a background
// writer for the disk and cluster tiers, so the engine thread never waits on a disk. Reads go
// host, disk, cluster; a unit found below host is copied into host. A tier that fails (a full
// disk, a corrupt file, Redis down) costs a miss, never a wrong unit: every file is verified.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/base/clock.h"
#include "deepinfer/base/status.h"
#include "deepinfer/kv/disk_tier.h"
#include "deepinfer/kv/host_tier.h"
#include "deepinfer/kv/redis_index.h"
#include "deepinfer/kv/unit_record.h"

namespace deepinfer::kv {

enum class Tier { kDevice = 0, kHost = 1, kDisk = 2, kCluster = 3 };
inline constexpr int kNumTiers = 4;

struct UnitTiersOptions {
  std::string fingerprint;    // the model/layout fingerprint (root of the key chain)
  int64_t host_bytes = 0;     // --kv-host-memory (0: no host tier)
  std::string disk_dir;       // --kv-disk-dir (empty: no disk tier)
  int64_t disk_bytes = 0;     // --kv-disk-bytes
  std::string cluster_dir;    // --kv-cluster-dir (empty: no cluster tier)
  int64_t cluster_bytes = 0;  // this replica's share of the cluster directory
  std::string cluster_redis;  // --kv-cluster-redis (empty: the directory is the index)
  int64_t max_pending_bytes = int64_t{512} << 20;  // queued for the writer; beyond: dropped
  const Clock* clock = nullptr;                    // nullptr: SystemClock
};

struct UnitTiersStats {
  HostTierStats host;
  DiskTierStats disk, cluster;
  RedisIndexStats redis;
  bool redis_healthy = false;
  int64_t writes_dropped = 0;  // the writer's queue was full
  int64_t write_errors = 0;    // disk/cluster puts that failed (full disk, I/O, Redis down)
};

class UnitTiers {
 public:
  // Errors name the flag: a disk or cluster directory that can't be created, a malformed or
  // unreachable --kv-cluster-redis.
  static StatusOr<std::unique_ptr<UnitTiers>> open(UnitTiersOptions options);
  ~UnitTiers();

  // Whether some tier holds each unit of a chain, and whether one may hold it with a snapshot
  // (the cluster's snapshot shows only when the file is read, so there it is a maybe). One
  // batched Redis query for the whole chain.
  struct Presence {
    bool present = false;
    bool snapshot = false;
  };
  std::vector<Presence> locate(std::span<const UnitKey> keys);
  // The verified unit from the highest tier holding it (its tier in *from), or null.
  std::shared_ptr<const UnitRecord> get(const UnitKey& key, Tier* from);
  // Host now; disk and cluster on the writer thread. A record without a snapshot never replaces
  // one with a snapshot (that tier's expiry is extended instead).
  void put(std::shared_ptr<const UnitRecord> record);
  // A hit: extends expiry (never shortens) in every tier holding the unit (host now, the others
  // on the writer thread).
  void touch(const UnitKey& key, int64_t expires_at_s);
  // Expired units and capacity, every tier.
  void sweep();
  // Waits until the writer has stored everything queued (tests, shutdown, benches).
  void flush();
  UnitTiersStats stats() const;
  bool has_disk() const { return disk_ != nullptr; }
  bool has_cluster() const { return cluster_ != nullptr; }

 private:
  explicit UnitTiers(UnitTiersOptions options);
  void writer_loop();
  std::shared_ptr<const UnitRecord> cluster_get(const UnitKey& key);
  int64_t ttl_of(int64_t expires_at_s) const;

  UnitTiersOptions options_;
  const Clock* clock_;
  std::unique_ptr<HostTier> host_;
  std::unique_ptr<DiskTier> disk_, cluster_;
  std::unique_ptr<RedisIndex> redis_;
  LayoutTag layout_{};

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  // A store (record set) or an expiry extension (key, expires_at_s) for the disk and cluster.
  struct Job {
    std::shared_ptr<const UnitRecord> record;
    UnitKey key;
    int64_t expires_at_s = 0;
  };
  void enqueue(Job job, int64_t bytes);
  void write_lower(const Job& job);
  std::deque<Job> queue_;
  int64_t queued_bytes_ = 0;
  bool writing_ = false, stop_ = false;
  int64_t writes_dropped_ = 0, write_errors_ = 0;
  std::thread writer_;
};

}  // namespace deepinfer::kv
