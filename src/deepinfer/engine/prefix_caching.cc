#include "deepinfer/engine/prefix_caching.h"

#include <algorithm>
#include <chrono>

#include "deepinfer/base/check.h"

namespace deepinfer {

Status PrefixCaching::validate(const PrefixCachingOptions& options, int page_tokens) {
  if (options.interval_tokens <= 0 || options.interval_tokens % page_tokens != 0)
    return invalid_argument("--kv-cache-interval must be a positive multiple of " +
                            std::to_string(page_tokens) + " tokens, got " +
                            std::to_string(options.interval_tokens));
  if (options.agent_retention_s <= 0)
    return invalid_argument("--kv-retention-agent must be positive, got " +
                            std::to_string(options.agent_retention_s) + " s");
  if (options.chat_retention_s <= 0)
    return invalid_argument("--kv-retention-chat must be positive, got " +
                            std::to_string(options.chat_retention_s) + " s");
  return ok_status();
}

PrefixCaching::PrefixCaching(PrefixCachingOptions options, kv::UnitKey root,
                             runtime::ModelRunner* runner, kv::KvManager* kv,
                             std::unique_ptr<kv::UnitTiers> tiers)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : &SystemClock::instance()),
      root_(root),
      runner_(runner),
      kv_(kv),
      tiers_(std::move(tiers)),
      page_tokens_(kv->spec().page_tokens) {
  last_sweep_s_ = now();
}

int64_t PrefixCaching::retention_s(kv::Retention r) const {
  switch (r) {
    case kv::Retention::kAgent:
      return options_.agent_retention_s;
    case kv::Retention::kChat:
      return options_.chat_retention_s;
    case kv::Retention::kNone:
      return 0;
  }
  return 0;
}

void PrefixCaching::extend_keys(SeqCacheState& c, const std::vector<int32_t>& tokens,
                                int64_t blocks) const {
  DI_CHECK(blocks * page_tokens_ <= static_cast<int64_t>(tokens.size()));
  while (static_cast<int64_t>(c.keys.size()) < blocks) {
    const size_t i = c.keys.size();
    const kv::UnitKey& parent = i == 0 ? root_ : c.keys.back();
    c.keys.push_back(kv::next_key(
        parent, {tokens.data() + i * page_tokens_, static_cast<size_t>(page_tokens_)}));
  }
}

void PrefixCaching::prepare(SeqCacheState& c, const std::vector<int32_t>& tokens,
                            int64_t prompt_len, sched::SchedRequest* r) {
  const int64_t t = now();
  const int64_t known = static_cast<int64_t>(tokens.size());
  c.expires_at_s = t + retention_s(c.retention);
  extend_keys(c, tokens, known / page_tokens_);
  // A start point leaves at least one token to compute: the logits come from it.
  const int64_t m = (known - 1) / page_tokens_;
  c.prompt_keys =
      std::make_shared<const std::vector<kv::UnitKey>>(c.keys.begin(), c.keys.begin() + m);
  c.points.clear();
  for (int64_t p = options_.interval_tokens; p < prompt_len; p += options_.interval_tokens)
    c.points.push_back(p);
  // The end of the user input: the last block a repeat of this prompt can start from (it must
  // compute a token), and the prompt's last whole block, where the next turn can start.
  for (int64_t p :
       {(prompt_len - 1) / page_tokens_ * page_tokens_, prompt_len / page_tokens_ * page_tokens_})
    if (p > 0 && (c.points.empty() || c.points.back() < p)) c.points.push_back(p);
  if (c.unit_tier.empty()) metrics_.queried_tokens += prompt_len;
  c.unit_tier.assign(static_cast<size_t>(m), kv::Tier::kDevice);

  r->prefix_keys = c.prompt_keys;
  r->cache_now_s = t;
  r->cache_extend_to_s = c.retention == kv::Retention::kNone ? 0 : c.expires_at_s;
  // A runner that snapshots inside rows needs no chunk to end at a point.
  r->chunk_ends.clear();
  if (!runner_->snapshots_inside_rows()) r->chunk_ends = c.points;
  if (m == 0 || !tiers_) return;

  // A longer prefix in a lower tier than on the device: bring it up now, so the scheduler's
  // attach finds it. Chain ends are tried longest first (one may turn out to lack a snapshot).
  const auto& keys = *c.prompt_keys;
  const kv::PrefixMatch on_device = kv_->match_prefix(keys, known - 1, t);
  const std::vector<kv::UnitTiers::Presence> below = tiers_->locate(keys);
  std::vector<int64_t> ends;
  for (int64_t i = 0; i < m; ++i) {
    const kv::PrefixCache::Unit* u = kv_->cache().find(keys[i]);
    const bool on_dev = u != nullptr && u->expires_at_s > t;
    if (!on_dev && !below[i].present) break;
    if ((on_dev && !u->snapshot.empty()) || below[i].snapshot) ends.push_back(i + 1);
  }
  std::vector<kv::UnitKey> pinned;
  const auto t0 = std::chrono::steady_clock::now();
  bool loaded = false;
  for (auto e = ends.rbegin(); e != ends.rend() && *e > on_device.num_units; ++e) {
    loaded = true;
    if (promote(c, *e, &pinned)) break;
  }
  for (const kv::UnitKey& k : pinned) kv_->unpin(k);
  if (loaded) {
    ++metrics_.loads;
    metrics_.load_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

bool PrefixCaching::promote(SeqCacheState& c, int64_t n, std::vector<kv::UnitKey>* pinned) {
  const auto& keys = *c.prompt_keys;
  const int64_t page_bytes = kv_->spec().page_bytes;
  const int64_t snapshot_bytes = kv_->spec().constant_pages_per_seq * page_bytes;
  for (int64_t i = 0; i < n; ++i) {
    const kv::UnitKey& key = keys[i];
    const bool need_snapshot = i == n - 1;
    const kv::PrefixCache::Unit* u = kv_->cache().find(key);
    const bool pinned_already = std::find(pinned->begin(), pinned->end(), key) != pinned->end();
    if (u != nullptr && u->expires_at_s > now() && (!need_snapshot || !u->snapshot.empty())) {
      if (!pinned_already) {
        kv_->pin(key);
        pinned->push_back(key);
      }
      continue;
    }
    kv::Tier from = kv::Tier::kHost;
    std::shared_ptr<const kv::UnitRecord> rec = tiers_->get(key, &from);
    if (!rec || static_cast<int64_t>(rec->page.size()) != page_bytes) return false;
    if (need_snapshot && static_cast<int64_t>(rec->snapshot.size()) != snapshot_bytes) return false;
    const kv::UnitKey parent = i == 0 ? root_ : keys[i - 1];
    std::optional<kv::KvManager::CachedPages> a =
        kv_->adopt(key, parent, (i + 1) * page_tokens_, need_snapshot,
                   std::max(rec->expires_at_s, c.expires_at_s), rec->retention);
    if (!a) return false;
    std::vector<int32_t> pages;
    std::string bytes;
    if (a->new_unit) {
      pages.push_back(a->page);
      bytes = rec->page;
    }
    if (need_snapshot) {
      pages.insert(pages.end(), a->snapshot.begin(), a->snapshot.end());
      bytes += rec->snapshot;
    }
    if (!runner_->write_pages(pages, bytes).ok()) {
      if (a->new_unit) {
        kv_->drop_unit(key);
      } else {
        kv_->drop_snapshot(key);
      }
      return false;
    }
    metrics_.promoted_bytes += static_cast<int64_t>(bytes.size());
    if (!pinned_already) {
      kv_->pin(key);
      pinned->push_back(key);
    }
    c.unit_tier[static_cast<size_t>(i)] = from;
  }
  return true;
}

void PrefixCaching::on_attached(SeqCacheState& c, int64_t cached) {
  const int64_t units = cached / page_tokens_;
  if (!c.counted) {
    for (int64_t i = 0; i < units && i < static_cast<int64_t>(c.unit_tier.size()); ++i)
      metrics_.hit_tokens[static_cast<size_t>(c.unit_tier[i])] += page_tokens_;
    c.counted = true;
  }
  if (tiers_ && c.retention != kv::Retention::kNone)
    for (int64_t i = 0; i < units; ++i) tiers_->touch(c.keys[i], c.expires_at_s);
}

void PrefixCaching::add_row_snapshots(const SeqCacheState& c, runtime::StepRow* row) {
  if (!runner_->snapshots_inside_rows() || c.retention == kv::Retention::kNone || row->speculative)
    return;
  const int64_t end = row->start_pos + row->num_tokens;
  auto p = std::upper_bound(c.points.begin(), c.points.end(), row->start_pos);
  for (; p != c.points.end() && *p < end; ++p) {
    std::optional<std::vector<int32_t>> pages = kv_->allocate_snapshot();
    if (!pages) return;  // no room: the units are cached at the row's end without it
    row_snapshots_.push_back({row->seq_id, *p, std::move(*pages)});
    row->snapshots.push_back({*p, &row_snapshots_.back().pages});
  }
}

void PrefixCaching::drop_row_snapshots() {
  for (const RowSnapshotPages& s : row_snapshots_) kv_->release_pages(s.pages);
  row_snapshots_.clear();
}

void PrefixCaching::note_published(std::vector<kv::KvManager::CachedPages> pub,
                                   const SeqCacheState& c, bool decoding) {
  for (kv::KvManager::CachedPages& p : pub) {
    const kv::PrefixCache::Unit* u = kv_->cache().find(p.key);
    metrics_.stored_units += p.new_unit ? 1 : 0;
    metrics_.snapshots += p.snapshot.empty() ? 0 : 1;
    // A decode-time snapshot goes down only when the sequence ends (on_finish): most are
    // replaced 128 tokens later.
    if (decoding) p.snapshot.clear();
    if (!p.new_unit && p.snapshot.empty()) continue;
    if (!p.new_unit) p.page = -1;  // the lower tiers have the page already
    writes_.push_back({p, u->parent, u->end_tokens, c.expires_at_s, c.retention});
  }
}

void PrefixCaching::after_row(SeqCacheState& c, uint64_t seq_id, const std::vector<int32_t>& tokens,
                              int64_t prompt_len, int64_t end_pos) {
  for (RowSnapshotPages& s : row_snapshots_) {
    if (s.seq_id != seq_id || s.pages.empty()) continue;
    const int64_t blocks = s.end_pos / page_tokens_;
    extend_keys(c, tokens, blocks);
    note_published(
        kv_->publish_with_snapshot(seq_id, {c.keys.data(), static_cast<size_t>(blocks)}, root_,
                                   std::move(s.pages), c.expires_at_s, c.retention),
        c, /*decoding=*/false);
    s.pages.clear();
  }
  if (end_pos % page_tokens_ != 0 || c.retention == kv::Retention::kNone) return;
  const bool prompt_point = std::binary_search(c.points.begin(), c.points.end(), end_pos);
  const bool decoding = end_pos > prompt_len;
  if (!prompt_point && !decoding) return;
  const int64_t blocks = end_pos / page_tokens_;
  extend_keys(c, tokens, blocks);
  note_published(
      kv_->publish(seq_id, {c.keys.data(), static_cast<size_t>(blocks)}, root_,
                   /*snapshot_at_end=*/true, c.expires_at_s, c.retention, &copy_batch_.page_copies),
      c, decoding);
  if (decoding) {
    const kv::UnitKey& now_key = c.keys[static_cast<size_t>(blocks - 1)];
    if (c.rolling && *c.rolling != now_key) {
      const kv::PrefixCache::Unit* old = kv_->cache().find(*c.rolling);
      if (old && !std::binary_search(c.points.begin(), c.points.end(), old->end_tokens))
        kv_->drop_snapshot(*c.rolling);
    }
    c.rolling = now_key;
  }
}

void PrefixCaching::on_finish(SeqCacheState& c) {
  if (!c.rolling || !tiers_) return;
  const kv::PrefixCache::Unit* u = kv_->cache().find(*c.rolling);
  if (u == nullptr || u->snapshot.empty()) return;
  kv::KvManager::CachedPages p{u->key, -1, u->snapshot, false};
  writes_.push_back({p, u->parent, u->end_tokens, u->expires_at_s, u->retention});
  c.rolling.reset();
}

std::shared_ptr<kv::UnitRecord> PrefixCaching::read_unit(const kv::KvManager::CachedPages& p,
                                                         const kv::UnitKey& parent,
                                                         int64_t end_tokens, int64_t expires_at_s,
                                                         kv::Retention r) {
  // A snapshot-only write carries the unit's page too: a tier record is always whole.
  const kv::PrefixCache::Unit* u = kv_->cache().find(p.key);
  if (u == nullptr) return nullptr;  // evicted since (the pages may hold another unit now)
  // The page and the snapshot read apart, each straight into its field: a prompt's write-down
  // runs between steps, and splitting one read would copy every byte once more.
  StatusOr<std::string> page = runner_->read_pages({u->page});
  if (!page.ok()) return nullptr;
  std::string snapshot;
  if (!p.snapshot.empty()) {
    StatusOr<std::string> bytes = runner_->read_pages(p.snapshot);
    if (!bytes.ok()) return nullptr;
    snapshot = std::move(*bytes);
  }
  auto rec = std::make_shared<kv::UnitRecord>();
  rec->key = p.key;
  rec->parent = parent;
  rec->end_tokens = end_tokens;
  rec->page = std::move(*page);
  rec->snapshot = std::move(snapshot);
  rec->expires_at_s = expires_at_s;
  rec->retention = r;
  return rec;
}

Status PrefixCaching::end_step() {
  drop_row_snapshots();  // any left: rows after_row never saw (published ones are empty)
  Status st;
  if (!copy_batch_.page_copies.empty()) {
    runtime::StepOutput out;
    copy_batch_.group_step = false;  // between steps, this rank alone
    st = runner_->execute(copy_batch_, &out);
    copy_batch_.page_copies.clear();
    if (!st.ok()) {
      // The snapshots taken this step hold whatever their pages held before: never use them.
      for (const PendingWrite& w : writes_)
        if (!w.pages.snapshot.empty()) kv_->drop_snapshot(w.pages.key);
    }
  }
  if (tiers_ && st.ok()) {
    for (const PendingWrite& w : writes_) {
      // A unit whose snapshot was dropped since (replaced by a later one) still has its page.
      const kv::PrefixCache::Unit* u = kv_->cache().find(w.pages.key);
      if (u == nullptr) continue;
      kv::KvManager::CachedPages p = w.pages;
      if (p.snapshot != u->snapshot) p.snapshot.clear();
      if (!p.new_unit && p.snapshot.empty()) continue;
      if (auto rec = read_unit(p, w.parent, w.end_tokens, w.expires_at_s, w.retention))
        tiers_->put(std::move(rec));
    }
  }
  writes_.clear();
  return st;
}

void PrefixCaching::maybe_sweep() {
  const int64_t t = now();
  if (t - last_sweep_s_ < 60) return;
  last_sweep_s_ = t;
  kv_->expire_cache(t);
  if (tiers_) tiers_->sweep();
}

PrefixCacheMetrics PrefixCaching::metrics() const {
  PrefixCacheMetrics m = metrics_;
  m.device = kv_->cache().stats();
  return m;
}

}  // namespace deepinfer
