// What the engine hands the model runner for one step, as plain data (the scheduler's StepPlan
// made concrete): rollbacks of speculative rows, page copies for forked sequences, then one row
// per scheduled sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/kv/page_spec.h"

namespace deepinfer::runtime {

// A copy of a sequence's constant state as it stands after position end_pos - 1, taken inside a
// row (the prefix cache's persistence points, without cutting the prefill chunk there).
struct RowSnapshot {
  int64_t end_pos = 0;
  // constant_pages_per_seq pages no row of the step touches, valid during execute(); afterwards
  // they hold what the sequence's constant pages would hold had the row ended at end_pos.
  const std::vector<int32_t>* pages = nullptr;
};

// One sequence's work in this step: a prefill chunk or a single decode token.
struct StepRow {
  uint64_t seq_id = 0;
  // Positions [start_pos, start_pos + num_tokens). 0 starts the sequence afresh: the runner
  // initializes its constant state in its pages, whatever they held. Otherwise the pages hold
  // exactly start_pos tokens of state (earlier steps, or a fork's page copies).
  int64_t start_pos = 0;
  const int32_t* tokens = nullptr;  // num_tokens ids, valid during execute()
  int64_t num_tokens = 0;
  // The sequence's pages (kv::KvManager::state_pages and block_table), already covering
  // start_pos + num_tokens tokens; valid during execute().
  const std::vector<int32_t>* state_pages = nullptr;
  const std::vector<int32_t>* block_table = nullptr;
  // Return the logits of the row's last position (it ends the known tokens: sample there).
  bool wants_logits = false;
  // With wants_logits: the engine needs only that row's argmax (greedy with nothing else shaping
  // the logits), so the runner may return just StepOutput::argmax and leave the logits row
  // unwritten (the CUDA runner then copies no logits back).
  bool argmax_only = false;
  // YOCO prefill truncation: positions before this one feed nothing the engine will use (no
  // cached state, no logits), so they may skip that work (the final layer's MoE, the head).
  // It may lie past the row (a prefill chunk before the last); with wants_logits it is at most
  // the row's last position. 0: every position in full. Runners may ignore it (the CUDA
  // runner's deepseek_v41 forward does so far).
  int64_t keep_from_pos = 0;
  // Speculative verification (a sampled token and its drafts): logits for every position of the
  // row, num_tokens rows in order (wants_logits is implied, argmax_only ignored), and the runner
  // keeps what it needs to cut the sequence back to any length in [start_pos, start_pos +
  // num_tokens] through StepBatch::rollbacks before the sequence's next row.
  bool speculative = false;
  // Snapshots inside the row, end_pos strictly increasing in (start_pos, start_pos +
  // num_tokens); never on a speculative row. Only for runners whose snapshots_inside_rows().
  std::vector<RowSnapshot> snapshots{};  // a default member initializer: brace-init rows omit it
};

// Cuts a sequence whose latest row was speculative back to num_tokens (its accepted prefix).
// Afterwards its state, in its pages and in the runner, is exactly that of num_tokens tokens
// computed without speculation. The tables are the sequence's, as for a row.
struct Rollback {
  uint64_t seq_id = 0;
  int64_t num_tokens = 0;
  const std::vector<int32_t>* state_pages = nullptr;
  const std::vector<int32_t>* block_table = nullptr;
};

struct StepBatch {
  std::vector<Rollback> rollbacks;        // done first
  std::vector<kv::PageCopy> page_copies;  // done before any row runs
  std::vector<StepRow> rows;              // at most one per sequence
  // The engine's step (rows, or none on an idle expert-parallel rank), which the ranks of an
  // expert-parallel group run together. false: page copies or rollbacks between steps, which
  // one rank does alone (no forward but a rollback's replay, and the engine refuses
  // speculative decoding under expert parallelism).
  bool group_step = true;
  int64_t num_tokens() const {
    int64_t n = 0;
    for (const StepRow& r : rows) n += r.num_tokens;
    return n;
  }
};

struct StepOutput {
  // One vocab-sized row per StepRow with wants_logits (num_tokens rows for a speculative row),
  // in row order, in the runner's own memory
  // (page-locked on cuda, so the device writes it at full copy speed): valid, and writable (the
  // engine masks in place), until the runner's next execute.
  float* logits = nullptr;
  int64_t num_logit_rows = 0;
  // One per logits row, same lifetime: for rows with argmax_only, the index of the row's largest
  // logit (ties to the lowest id); other entries are unspecified.
  const int32_t* argmax = nullptr;
};

}  // namespace deepinfer::runtime
