#include "deepinfer/kv/unit_tiers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace deepinfer::kv {

UnitTiers::UnitTiers(UnitTiersOptions options)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : &SystemClock::instance()) {}

StatusOr<std::unique_ptr<UnitTiers>> UnitTiers::open(UnitTiersOptions options) {
  std::unique_ptr<UnitTiers> t(new UnitTiers(std::move(options)));
  const UnitTiersOptions& o = t->options_;
  if (!o.cluster_redis.empty() && o.cluster_dir.empty())
    return invalid_argument("--kv-cluster-redis needs --kv-cluster-dir (where the units live)");
  t->layout_ = layout_tag(o.fingerprint);
  if (o.host_bytes > 0) t->host_ = std::make_unique<HostTier>(o.host_bytes, t->clock_);
  // One subdirectory per fingerprint: a tier opened for another model must not delete (or even
  // list) this one's units in a shared directory.
  const std::string sub = "/" + UnitKey{t->layout_}.hex().substr(0, 16);
  if (!o.disk_dir.empty()) {
    auto d = DiskTier::open({o.disk_dir + sub, o.disk_bytes, o.fingerprint, t->clock_});
    if (!d.ok()) return d.status().with_context("--kv-disk-dir");
    t->disk_ = std::move(*d);
  }
  if (!o.cluster_dir.empty()) {
    auto c = DiskTier::open({o.cluster_dir + sub, o.cluster_bytes, o.fingerprint, t->clock_});
    if (!c.ok()) return c.status().with_context("--kv-cluster-dir");
    t->cluster_ = std::move(*c);
  }
  if (!o.cluster_redis.empty()) {
    RedisIndexOptions ro;
    ro.url = o.cluster_redis;
    ro.key_prefix = "deepinfer:kv:" + UnitKey{t->layout_}.hex().substr(0, 16) + ":";
    ASSIGN_OR_RETURN(t->redis_, RedisIndex::connect(ro));
  }
  if (t->disk_ || t->cluster_) t->writer_ = std::thread([p = t.get()] { p->writer_loop(); });
  return t;
}

UnitTiers::~UnitTiers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

int64_t UnitTiers::ttl_of(int64_t expires_at_s) const {
  return std::max<int64_t>(1, expires_at_s - clock_->now_unix_s());
}

std::vector<UnitTiers::Presence> UnitTiers::locate(std::span<const UnitKey> keys) {
  std::vector<Presence> found(keys.size());
  std::vector<bool> in_redis;
  if (redis_ && !keys.empty()) {
    std::vector<std::string> hex;
    hex.reserve(keys.size());
    for (const UnitKey& k : keys) hex.push_back(k.hex());
    if (auto r = redis_->exists_many(hex); r.ok()) in_redis = std::move(*r);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const UnitKey& k = keys[i];
    Presence& f = found[i];
    if (host_ && host_->contains(k)) {
      f.present = true;
      f.snapshot = host_->contains(k, /*with_snapshot=*/true);
    }
    if (!f.snapshot && disk_) {
      if (std::optional<UnitInfo> d = disk_->info(k)) {
        f.present = true;
        f.snapshot = d->has_snapshot;
      }
    }
    if (!f.snapshot && cluster_) {
      // Without Redis the shared directory is the index: another replica's file counts too.
      struct stat st;
      if (redis_ ? (i < in_redis.size() && in_redis[i])
                 : ::stat(cluster_->path_of(k).c_str(), &st) == 0)
        f.present = f.snapshot = true;
    }
  }
  return found;
}

std::shared_ptr<const UnitRecord> UnitTiers::cluster_get(const UnitKey& key) {
  StatusOr<UnitRecord> r = read_unit(cluster_->path_of(key), layout_);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kDataLoss) {
      ::unlink(cluster_->path_of(key).c_str());
      if (redis_) (void)redis_->erase(key.hex());
    }
    return nullptr;
  }
  if (r->expires_at_s <= clock_->now_unix_s()) return nullptr;
  return std::make_shared<const UnitRecord>(std::move(*r));
}

std::shared_ptr<const UnitRecord> UnitTiers::get(const UnitKey& key, Tier* from) {
  if (host_) {
    if (auto r = host_->get(key)) {
      *from = Tier::kHost;
      return r;
    }
  }
  std::shared_ptr<const UnitRecord> r;
  if (disk_) {
    if (std::optional<UnitRecord> d = disk_->get(key)) {
      r = std::make_shared<const UnitRecord>(std::move(*d));
      *from = Tier::kDisk;
    }
  }
  if (!r && cluster_) {
    r = cluster_get(key);
    *from = Tier::kCluster;
  }
  if (r && host_) host_->put(r);
  return r;
}

void UnitTiers::put(std::shared_ptr<const UnitRecord> record) {
  if (host_) {
    if (!record->has_snapshot() && host_->contains(record->key, /*with_snapshot=*/true)) {
      host_->touch(record->key, record->expires_at_s);
    } else {
      host_->put(record);
    }
  }
  if (!disk_ && !cluster_) return;
  const int64_t bytes = record->bytes();
  enqueue({std::move(record), {}, 0}, bytes);
}

void UnitTiers::enqueue(Job job, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queued_bytes_ + bytes > options_.max_pending_bytes) {
    ++writes_dropped_;
    return;
  }
  queued_bytes_ += bytes;
  queue_.push_back(std::move(job));
  cv_.notify_all();
}

// The writer thread's half of put() and touch().
void UnitTiers::write_lower(const Job& job) {
  if (!job.record) {
    if (disk_) disk_->touch(job.key, job.expires_at_s);
    if (cluster_) cluster_->touch(job.key, job.expires_at_s);
    if (redis_) (void)redis_->extend(job.key.hex(), ttl_of(job.expires_at_s));
    return;
  }
  const UnitRecord& r = *job.record;
  int errors = 0;
  auto store = [&](DiskTier* tier) {
    if (!r.has_snapshot()) {
      if (auto info = tier->info(r.key); info && info->has_snapshot) {
        tier->touch(r.key, r.expires_at_s);
        return true;
      }
    }
    if (tier->put(r).ok()) return true;
    ++errors;
    return false;
  };
  if (disk_) store(disk_.get());
  if (cluster_ && store(cluster_.get()) && redis_ &&
      !redis_->put(r.key.hex(), "1", ttl_of(r.expires_at_s)).ok())
    ++errors;
  if (errors) {
    std::lock_guard<std::mutex> lock(mu_);
    write_errors_ += errors;
  }
}

void UnitTiers::writer_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ with nothing left to write
    Job job = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    write_lower(job);
    lock.lock();
    writing_ = false;
    queued_bytes_ -= job.record ? job.record->bytes() : 0;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void UnitTiers::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

void UnitTiers::touch(const UnitKey& key, int64_t expires_at_s) {
  if (host_) host_->touch(key, expires_at_s);
  if (disk_ || cluster_) enqueue({nullptr, key, expires_at_s}, 0);
}

void UnitTiers::sweep() {
  if (host_) host_->sweep();
  if (disk_) disk_->sweep();
  if (cluster_) cluster_->sweep();
}

UnitTiersStats UnitTiers::stats() const {
  UnitTiersStats s;
  if (host_) s.host = host_->stats();
  if (disk_) s.disk = disk_->stats();
  if (cluster_) s.cluster = cluster_->stats();
  if (redis_) {
    s.redis = redis_->stats();
    s.redis_healthy = redis_->healthy();
  }
  std::lock_guard<std::mutex> lock(mu_);
  s.writes_dropped = writes_dropped_;
  s.write_errors = write_errors_;
  return s;
}

}  // namespace deepinfer::kv
