#include "deepinfer/kv/disk_tier.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <tuple>
#include <vector>

namespace deepinfer::kv {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kUnitSuffix = ".unit";

bool is_shard_name(const std::string& name) {
  return name.size() == 2 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The key a "<64 hex>.unit" file name claims, if it is one.
std::optional<UnitKey> key_of_file_name(const std::string& name) {
  if (name.size() != 64 + kUnitSuffix.size() || !name.ends_with(kUnitSuffix)) return std::nullopt;
  const std::string_view hex = std::string_view(name).substr(0, 64);
  std::optional<UnitKey> key = UnitKey::from_hex(hex);
  if (!key || key->hex() != hex) return std::nullopt;  // we write lowercase only
  return key;
}

}  // namespace

StatusOr<std::unique_ptr<DiskTier>> DiskTier::open(DiskTierOptions options) {
  if (options.dir.empty()) return invalid_argument("DiskTierOptions.dir is empty");
  if (options.fingerprint.empty()) {
    return invalid_argument("DiskTierOptions.fingerprint is empty (disk tier " + options.dir + ")");
  }
  if (options.capacity_bytes <= 0) {
    return invalid_argument("DiskTierOptions.capacity_bytes must be positive, got " +
                            std::to_string(options.capacity_bytes) + " (disk tier " + options.dir +
                            ")");
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec || !fs::is_directory(options.dir, ec)) {
    return internal_error("cannot create disk tier directory " + options.dir + ": " +
                          (ec ? ec.message() : std::string("not a directory")));
  }
  const Clock* clock = options.clock ? options.clock : &SystemClock::instance();
  std::unique_ptr<DiskTier> tier(new DiskTier(std::move(options), clock));
  RETURN_IF_ERROR(tier->scan());
  return tier;
}

DiskTier::DiskTier(DiskTierOptions options, const Clock* clock)
    : options_(std::move(options)), layout_(layout_tag(options_.fingerprint)), clock_(clock) {}

// Headers only: start-up cost is one small read per unit, not the payloads. Whatever a crash
// or another model left behind is deleted here, so later lookups only see files that were
// complete when written.
Status DiskTier::scan() {
  struct Found {
    fs::file_time_type mtime;
    UnitKey key;
    UnitHeader header;
  };
  std::vector<Found> found;
  const int64_t now = clock_->now_unix_s();
  std::error_code ec;
  for (fs::directory_iterator shards(options_.dir, ec), end; !ec && shards != end;
       shards.increment(ec)) {
    const std::string shard = shards->path().filename().string();
    std::error_code type_ec;
    if (!is_shard_name(shard) || !shards->is_directory(type_ec)) continue;
    std::error_code shard_ec;
    for (fs::directory_iterator files(shards->path(), shard_ec); !shard_ec && files != end;
         files.increment(shard_ec)) {
      const std::string name = files->path().filename().string();
      const std::string path = files->path().string();
      if (is_temp_file_name(name)) {
        ::unlink(path.c_str());
        ++stats_.removed_at_open;
        continue;
      }
      if (!name.ends_with(kUnitSuffix)) continue;  // not ours: leave it alone
      const std::optional<UnitKey> key = key_of_file_name(name);
      StatusOr<UnitHeader> header =
          key ? read_header(path, layout_) : StatusOr<UnitHeader>(data_loss(path + ": bad name"));
      if (!header.ok() && header.status().code() == StatusCode::kNotFound) continue;
      if (!header.ok() && header.status().code() != StatusCode::kDataLoss) {
        return header.status().with_context("scanning disk tier " + options_.dir);
      }
      if (!header.ok() || header->key != *key || key->hex().substr(0, 2) != shard) {
        ::unlink(path.c_str());
        ++stats_.removed_at_open;
        continue;
      }
      if (header->expires_at_s <= now) {
        ::unlink(path.c_str());
        ++stats_.evicted_expired;
        continue;
      }
      std::error_code time_ec;
      const fs::file_time_type mtime = files->last_write_time(time_ec);
      found.push_back({time_ec ? fs::file_time_type{} : mtime, *key, *header});
    }
    if (shard_ec) {
      return internal_error("cannot list disk tier directory " + shards->path().string() + ": " +
                            shard_ec.message());
    }
  }
  if (ec) {
    return internal_error("cannot list disk tier directory " + options_.dir + ": " + ec.message());
  }
  // The last write (a put or a touch) stands in for the last use the previous process saw.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.mtime, a.key) < std::tie(b.mtime, b.key);
  });
  std::lock_guard lock(mu_);
  for (const Found& f : found) add_locked(f.key, f.header);
  EvictionCounts ignored;
  evict_to_capacity_locked(&ignored);
  return ok_status();
}

std::string DiskTier::path_of(const UnitKey& key) const {
  const std::string hex = key.hex();
  return options_.dir + "/" + hex.substr(0, 2) + "/" + hex + std::string(kUnitSuffix);
}

void DiskTier::add_locked(const UnitKey& key, const UnitHeader& header) {
  Entry& e = index_[key];
  e.bytes = header.file_bytes();
  e.expires_at_s = header.expires_at_s;
  e.end_tokens = header.end_tokens;
  e.has_snapshot = header.snapshot_bytes > 0;
  e.generation = next_generation_++;
  e.lru = lru_.insert(lru_.end(), key);
  ++stats_.units;
  stats_.bytes += e.bytes;
}

void DiskTier::remove_locked(Index::iterator it) {
  --stats_.units;
  stats_.bytes -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

void DiskTier::drop_locked(Index::iterator it) {
  ::unlink(path_of(it->first).c_str());
  remove_locked(it);
}

bool DiskTier::expired_locked(const Entry& e) const {
  return e.expires_at_s <= clock_->now_unix_s();
}

void DiskTier::evict_to_capacity_locked(EvictionCounts* counts) {
  while (stats_.bytes > options_.capacity_bytes && !lru_.empty()) {
    const auto it = index_.find(lru_.front());
    if (expired_locked(it->second)) {
      ++counts->expired;
      ++stats_.evicted_expired;
    } else {
      ++counts->capacity;
      ++stats_.evicted_capacity;
    }
    drop_locked(it);
  }
}

Status DiskTier::put(const UnitRecord& record) {
  const std::string hex = record.key.hex();
  const std::string shard = options_.dir + "/" + hex.substr(0, 2);
  const std::string name = hex + std::string(kUnitSuffix);
  const int64_t file_bytes = kUnitHeaderBytes + record.bytes() + kUnitTrailerBytes;
  if (file_bytes > options_.capacity_bytes) {
    return resource_exhausted("unit " + hex + " takes " + std::to_string(file_bytes) +
                              " bytes, more than capacity_bytes " +
                              std::to_string(options_.capacity_bytes) + " of disk tier " +
                              options_.dir);
  }
  // A new shard directory must itself be durable before a file in it can be.
  if (::mkdir(shard.c_str(), 0755) == 0) {
    if (Status st = sync_directory(options_.dir); !st.ok()) {
      std::lock_guard lock(mu_);
      ++stats_.io_errors;
      return st;
    }
  } else if (errno != EEXIST) {
    const std::error_code err(errno, std::generic_category());
    std::lock_guard lock(mu_);
    ++stats_.io_errors;
    return internal_error("cannot create disk tier directory " + shard + ": " + err.message());
  }
  // The payload write and its fsync, the slow part, run outside the lock.
  StatusOr<std::string> temp = write_temp_file(shard, name, encode_unit(record, layout_));
  if (!temp.ok()) {
    std::lock_guard lock(mu_);
    ++stats_.io_errors;
    return temp.status();
  }
  uint64_t generation = 0;
  {
    // The rename runs under the lock so the files and the index change in the same order, and
    // under the key's file lock so it never lands between a touch's check and its write.
    std::lock_guard file_lock(file_mutex(record.key));
    std::lock_guard lock(mu_);
    if (Status st = rename_temp_file(*temp, shard, name); !st.ok()) {
      ++stats_.io_errors;
      return st;
    }
    if (const auto old = index_.find(record.key); old != index_.end()) remove_locked(old);
    UnitHeader header;
    header.key = record.key;
    header.end_tokens = record.end_tokens;
    header.expires_at_s = record.expires_at_s;
    header.page_bytes = static_cast<int64_t>(record.page.size());
    header.snapshot_bytes = static_cast<int64_t>(record.snapshot.size());
    add_locked(record.key, header);
    generation = index_[record.key].generation;
    stats_.bytes_written += file_bytes;
    EvictionCounts counts;
    evict_to_capacity_locked(&counts);
  }
  if (Status st = sync_directory(shard); !st.ok()) {
    // Not durable: drop it rather than report a failed put of a unit that stays visible.
    std::lock_guard lock(mu_);
    ++stats_.io_errors;
    if (const auto it = index_.find(record.key);
        it != index_.end() && it->second.generation == generation) {
      drop_locked(it);
    }
    return st;
  }
  return ok_status();
}

std::optional<UnitRecord> DiskTier::get(const UnitKey& key) {
  const std::string path = path_of(key);
  // A second attempt only when a concurrent write to the same file explains the first failure.
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      const auto it = index_.find(key);
      if (it == index_.end()) {
        ++stats_.misses;
        return std::nullopt;
      }
      if (expired_locked(it->second)) {
        ++stats_.evicted_expired;
        ++stats_.misses;
        drop_locked(it);
        return std::nullopt;
      }
      generation = it->second.generation;
    }
    StatusOr<UnitRecord> record = [&] {
      std::lock_guard file_lock(file_mutex(key));  // not during a touch's in-place write
      return read_unit(path, layout_);
    }();
    std::lock_guard lock(mu_);
    const auto it = index_.find(key);
    if (record.ok() && record->key == key) {
      ++stats_.hits;
      stats_.bytes_read += kUnitHeaderBytes + record->bytes() + kUnitTrailerBytes;
      if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
      return std::move(record).value();
    }
    if (it == index_.end()) break;  // evicted while we read
    if (it->second.generation != generation) continue;
    const StatusCode code = record.ok() ? StatusCode::kDataLoss : record.status().code();
    if (code == StatusCode::kDataLoss || code == StatusCode::kNotFound) {
      // Corrupt, or deleted behind our back: either way the unit is gone.
      ++stats_.corrupt_dropped;
      ++corrupt_since_sweep_;
      drop_locked(it);
    } else {
      ++stats_.io_errors;  // e.g. out of descriptors: the file may be fine, keep it
    }
    break;
  }
  std::lock_guard lock(mu_);
  ++stats_.misses;
  return std::nullopt;
}

bool DiskTier::contains(const UnitKey& key) const {
  std::lock_guard lock(mu_);
  const auto it = index_.find(key);
  return it != index_.end() && !expired_locked(it->second);
}

std::optional<UnitInfo> DiskTier::info(const UnitKey& key) const {
  std::lock_guard lock(mu_);
  const auto it = index_.find(key);
  if (it == index_.end() || expired_locked(it->second)) return std::nullopt;
  return UnitInfo{it->second.end_tokens, it->second.has_snapshot, it->second.bytes};
}

// In place rather than a whole-file rewrite: a touch follows every hit, and rewriting megabytes
// to move 8 bytes would double the tier's write traffic. The 16-byte write and its fdatasync run
// under the key's file lock, not the tier's: touches of one key land on disk in order, a get()
// of that key never reads a half-written expiry, and every other unit stays readable meanwhile.
void DiskTier::touch(const UnitKey& key, int64_t expires_at_s) {
  std::lock_guard file_lock(file_mutex(key));
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    const auto it = index_.find(key);
    if (it == index_.end() || expired_locked(it->second)) return;
    lru_.splice(lru_.end(), lru_, it->second.lru);
    if (expires_at_s <= it->second.expires_at_s) return;
    generation = it->second.generation;
  }
  const Status st = write_expiry_in_place(path_of(key), expires_at_s);
  std::lock_guard lock(mu_);
  const auto it = index_.find(key);
  // Gone (swept or evicted) since: nothing to record. A put replaces a file only under this
  // key's file lock, so the generation cannot have moved.
  if (it == index_.end() || it->second.generation != generation) return;
  if (!st.ok()) {
    ++stats_.io_errors;
    drop_locked(it);  // its expiry on disk may be torn now
    return;
  }
  it->second.expires_at_s = expires_at_s;
  stats_.bytes_written += 16;
}

EvictionCounts DiskTier::sweep() {
  std::lock_guard lock(mu_);
  EvictionCounts counts;
  for (auto it = index_.begin(); it != index_.end();) {
    const auto next = std::next(it);
    if (expired_locked(it->second)) {
      ++counts.expired;
      ++stats_.evicted_expired;
      drop_locked(it);
    }
    it = next;
  }
  evict_to_capacity_locked(&counts);
  counts.corrupt = corrupt_since_sweep_;
  corrupt_since_sweep_ = 0;
  return counts;
}

int64_t DiskTier::bytes() const {
  std::lock_guard lock(mu_);
  return stats_.bytes;
}

int64_t DiskTier::units() const {
  std::lock_guard lock(mu_);
  return stats_.units;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace deepinfer::kv
