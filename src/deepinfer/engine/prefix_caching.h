// The engine's side of the prefix cache (kv/prefix_cache.h for the device tier, kv/unit_tiers.h
// for host, disk and cluster): key chains over sequences' tokens, persistence points, snapshots
// after the steps that reach them, write-through to the lower tiers, promotion of a longer prefix
// from a lower tier before a sequence is scheduled, usage and metrics. Engine-thread only.
//
// A unit is one block of page_tokens (128) tokens; cuts are at block ends, where HCA has no
// partial window (docs/decisions/0006). A snapshot inside a prefill chunk is the runner's
// (StepRow::snapshots, docs/decisions/0020). A sequence can start at a cut only where a snapshot of
// its constant state (sliding-window rings, compressor windows) was taken: at its prompt's
// persistence points (every interval_tokens; at the end of the user input, the last block a
// repeat of the prompt can start from and the prompt's last whole block) and, while decoding,
// at the latest block end (the end of the model output, so the next turn of a conversation
// hits).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/clock.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/kv/unit_tiers.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/sched/request.h"

namespace deepinfer {

struct PrefixCachingOptions {
  int64_t interval_tokens = 2048;  // persistence points inside long prompts (multiple of 128)
  int64_t agent_retention_s = 3 * 86400;
  int64_t chat_retention_s = 7 * 86400;
  kv::UnitTiersOptions tiers;    // the engine opens them (UnitTiers::open)
  const Clock* clock = nullptr;  // nullptr: SystemClock
};

// What one sequence carries for the cache.
struct SeqCacheState {
  std::vector<kv::UnitKey> keys;  // chain over its whole blocks so far
  std::shared_ptr<const std::vector<kv::UnitKey>> prompt_keys;
  std::vector<int64_t> points;  // the prompt's persistence points
  // Per prompt unit: the tier it was promoted from before scheduling (kDevice: already there).
  std::vector<kv::Tier> unit_tier;
  std::optional<kv::UnitKey> rolling;  // unit of its latest decode-time snapshot
  kv::Retention retention = kv::Retention::kChat;
  int64_t expires_at_s = 0;
  bool counted = false;  // its cache hit is in the metrics
};

struct PrefixCacheMetrics {
  int64_t queried_tokens = 0;                       // prompt tokens of started sequences
  std::array<int64_t, kv::kNumTiers> hit_tokens{};  // by the tier the units came from
  int64_t loads = 0;                                // promotions from a lower tier
  double load_seconds = 0;                          // their total time
  int64_t promoted_bytes = 0;
  int64_t stored_units = 0, snapshots = 0;
  kv::PrefixCacheStats device;
};

class PrefixCaching {
 public:
  // Errors name the flag (interval, retention).
  static Status validate(const PrefixCachingOptions& options, int page_tokens);
  // root: kv::root_key of the model fingerprint (cache_fingerprint.h); tiers may be null (no
  // tier below the device).
  PrefixCaching(PrefixCachingOptions options, kv::UnitKey root, runtime::ModelRunner* runner,
                kv::KvManager* kv, std::unique_ptr<kv::UnitTiers> tiers);

  // A sequence (re)enters the scheduler with `tokens` known of which prompt_len are prompt: its
  // keys, persistence points, the promotion of a longer cached prefix from a lower tier, and the
  // SchedRequest fields that let the scheduler attach it.
  void prepare(SeqCacheState& c, const std::vector<int32_t>& tokens, int64_t prompt_len,
               sched::SchedRequest* r);
  // The scheduler attached `cached` tokens to the sequence: metrics, and the lower tiers' copies
  // of the units used get their expiry extended.
  void on_attached(SeqCacheState& c, int64_t cached);
  // Before a step, for a runner that takes snapshots inside rows (snapshots_inside_rows): the
  // prompt's persistence points strictly inside the prefill row get snapshot pages, when the
  // pool has room, in row->snapshots (so chunks need not end there); after_row caches them.
  void add_row_snapshots(const SeqCacheState& c, runtime::StepRow* row);
  // The step failed: its row snapshots' pages go back to the pool.
  void drop_row_snapshots();
  // After a step's forward: the row's snapshots inside it, then a row ending at a persistence
  // point or, in decode, at a block end, cache the sequence's blocks and a snapshot of its
  // constant state (copies queued for the latter).
  void after_row(SeqCacheState& c, uint64_t seq_id, const std::vector<int32_t>& tokens,
                 int64_t prompt_len, int64_t end_pos);
  // After the step's sampling: runs the queued snapshot copies, then writes new units through
  // to the lower tiers.
  Status end_step();
  // The sequence is done: its last decode-time snapshot goes to the lower tiers.
  void on_finish(SeqCacheState& c);
  // Expiry in every tier, at most once a minute of the clock.
  void maybe_sweep();

  int64_t retention_s(kv::Retention r) const;
  int64_t now() const { return clock_->now_unix_s(); }
  // Engine thread.
  PrefixCacheMetrics metrics() const;
  // Any thread (the tiers lock for themselves); empty without tiers below the device.
  kv::UnitTiersStats tier_stats() const { return tiers_ ? tiers_->stats() : kv::UnitTiersStats(); }

 private:
  void extend_keys(SeqCacheState& c, const std::vector<int32_t>& tokens, int64_t blocks) const;
  // Makes units [0, n) of keys resident with a snapshot at n - 1, from the lower tiers; false
  // (units made resident so far stay) when a unit can't be read or placed.
  bool promote(SeqCacheState& c, int64_t n, std::vector<kv::UnitKey>* pinned);
  std::shared_ptr<kv::UnitRecord> read_unit(const kv::KvManager::CachedPages& p,
                                            const kv::UnitKey& parent, int64_t end_tokens,
                                            int64_t expires_at_s, kv::Retention r);

  PrefixCachingOptions options_;
  const Clock* clock_;
  kv::UnitKey root_;
  runtime::ModelRunner* runner_;
  kv::KvManager* kv_;
  std::unique_ptr<kv::UnitTiers> tiers_;
  int page_tokens_;

  struct PendingWrite {
    kv::KvManager::CachedPages pages;
    kv::UnitKey parent;
    int64_t end_tokens = 0;
    int64_t expires_at_s = 0;
    kv::Retention retention = kv::Retention::kChat;
  };
  // The units a publish created or gave a snapshot go into the metrics and the write-down
  // (a decode-time snapshot only when the sequence ends).
  void note_published(std::vector<kv::KvManager::CachedPages> pub, const SeqCacheState& c,
                      bool decoding);

  struct RowSnapshotPages {
    uint64_t seq_id = 0;
    int64_t end_pos = 0;
    std::vector<int32_t> pages;  // StepRow::snapshots point here: a deque keeps them in place
  };
  std::deque<RowSnapshotPages> row_snapshots_;  // this step's
  runtime::StepBatch copy_batch_;               // snapshot copies only, no rows
  std::vector<PendingWrite> writes_;
  PrefixCacheMetrics metrics_;
  int64_t last_sweep_s_ = 0;
};

}  // namespace deepinfer
