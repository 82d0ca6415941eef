// The local-disk tier of the prefix cache: units as files under one directory, an in-memory
// index rebuilt from their headers at start-up, LRU eviction to a byte capacity and expiry by
// retention. Every read is verified (unit_file.h); a unit that fails verification is deleted and
// reported as a miss. Thread-safe: one mutex guards the index; payload reads and writes run
// outside it, so index lookups never wait on a disk transfer.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "deepinfer/base/clock.h"
#include "deepinfer/base/status.h"
#include "deepinfer/kv/unit_file.h"
#include "deepinfer/kv/unit_record.h"

namespace deepinfer::kv {

struct DiskTierOptions {
  std::string dir;               // created if missing; holds one fingerprint's units
  int64_t capacity_bytes = 0;    // on-disk bytes (headers and checksums included)
  std::string fingerprint;       // the layout fingerprint; files of another are deleted at open
  const Clock* clock = nullptr;  // nullptr: SystemClock
};

struct UnitInfo {
  int64_t end_tokens = 0;
  bool has_snapshot = false;
  int64_t bytes = 0;  // the file's size on disk
};

struct EvictionCounts {
  int64_t expired = 0;
  int64_t capacity = 0;
  int64_t corrupt = 0;  // units get() dropped as corrupt since the previous sweep
};

// Running totals for metrics.
struct DiskTierStats {
  int64_t units = 0;
  int64_t bytes = 0;
  int64_t bytes_written = 0;
  int64_t bytes_read = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evicted_expired = 0;
  int64_t evicted_capacity = 0;
  int64_t corrupt_dropped = 0;  // failed verification in get()
  int64_t removed_at_open = 0;  // temp files, bad headers, other fingerprints, wrong names
  int64_t io_errors = 0;        // failed puts and touches
};

class DiskTier {
 public:
  // kInvalidArgument for an empty dir or fingerprint or a capacity below one byte; an I/O error
  // naming the directory if it can't be created or listed.
  static StatusOr<std::unique_ptr<DiskTier>> open(DiskTierOptions options);

  // Stores (or replaces) the unit, then evicts least-recently-used units down to capacity.
  // On failure (a full disk, a unit larger than the capacity) no file is left and the index,
  // including any earlier copy of the unit, is unchanged.
  Status put(const UnitRecord& record);
  // The verified unit, or nullopt: absent, expired (removed), or corrupt (removed and counted).
  std::optional<UnitRecord> get(const UnitKey& key);
  // Index only; expired units are absent.
  bool contains(const UnitKey& key) const;
  std::optional<UnitInfo> info(const UnitKey& key) const;
  // Extends the unit's expiry to at least `expires_at_s` and marks it used; absent or expired
  // units are left alone. A unit whose file can't be rewritten is dropped.
  void touch(const UnitKey& key, int64_t expires_at_s);
  // Drops expired units, then least-recently-used ones until bytes() <= capacity.
  EvictionCounts sweep();

  int64_t bytes() const;
  int64_t units() const;
  DiskTierStats stats() const;
  // <dir>/<first two hex digits of the key>/<64 hex digits>.unit
  std::string path_of(const UnitKey& key) const;

 private:
  struct Entry {
    int64_t bytes = 0;
    int64_t expires_at_s = 0;
    int64_t end_tokens = 0;
    bool has_snapshot = false;
    // Bumped when the file is replaced (put), so a reader whose verification failed can tell a
    // concurrent replacement from real corruption.
    uint64_t generation = 0;
    std::list<UnitKey>::iterator lru;  // position in lru_ (back = most recently used)
  };
  using Index = std::unordered_map<UnitKey, Entry, UnitKeyHash>;

  DiskTier(DiskTierOptions options, const Clock* clock);
  Status scan();
  void add_locked(const UnitKey& key, const UnitHeader& header);
  void remove_locked(Index::iterator it);  // forgets the unit, leaves its file
  void drop_locked(Index::iterator it);    // deletes the file too
  bool expired_locked(const Entry& e) const;
  void evict_to_capacity_locked(EvictionCounts* counts);

  const DiskTierOptions options_;
  const LayoutTag layout_;
  const Clock* const clock_;

  // Serializes the file I/O of one key (a touch's in-place write, a get's read, a put's rename)
  // without holding mu_ through it; striped by key. Taken before mu_, never while holding it.
  std::mutex& file_mutex(const UnitKey& key) const {
    return file_mu_[UnitKeyHash{}(key) % file_mu_.size()];
  }
  mutable std::array<std::mutex, 64> file_mu_;
  mutable std::mutex mu_;
  Index index_;
  std::list<UnitKey> lru_;
  uint64_t next_generation_ = 1;
  int64_t corrupt_since_sweep_ = 0;
  DiskTierStats stats_;
};

}  // namespace deepinfer::kv
