// Sequences and rows for tests that drive a model runner through execute(StepBatch) as the engine
// does: each sequence's pages named explicitly, scattered over the pool.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/kv/page_spec.h"
#include "deepinfer/runtime/step_batch.h"

namespace deepinfer::testing {

// A sequence as the engine holds it: an id, its constant pages and its block table.
struct RunnerSeq {
  uint64_t id = 0;
  std::vector<int32_t> constant, table;
};

// Sequence k of `num_seqs`: every num_seqs-th page from k on, backwards, so neither a sequence's
// pages nor their order are contiguous; its table covers max_len tokens.
inline RunnerSeq runner_seq(uint64_t id, int k, const kv::PageSpec& spec, int64_t max_len,
                            int num_seqs) {
  const int64_t per = spec.constant_pages_per_seq + spec.pages_for_tokens(max_len);
  RunnerSeq s;
  s.id = id;
  for (int64_t j = per - 1; j >= 0; --j) {
    const int32_t page = static_cast<int32_t>(k + j * num_seqs);
    if (int64_t(s.constant.size()) < spec.constant_pages_per_seq)
      s.constant.push_back(page);
    else
      s.table.push_back(page);
  }
  return s;
}

// Positions [start, start + n) of the sequence, its tokens from ids.
inline runtime::StepRow runner_row(const RunnerSeq& s, const std::vector<int32_t>& ids,
                                   int64_t start, int64_t n, bool wants_logits) {
  runtime::StepRow r;
  r.seq_id = s.id;
  r.start_pos = start;
  r.tokens = ids.data() + start;
  r.num_tokens = n;
  r.state_pages = &s.constant;
  r.block_table = &s.table;
  r.wants_logits = wants_logits;
  return r;
}

}  // namespace deepinfer::testing
