// What the engine thread keeps per request and per sample (one of a request's n sequences).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/engine/constrained_decoding.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/prefix_caching.h"
#include "deepinfer/sample/sampler.h"
#include "deepinfer/sample/stop_checker.h"
#include "deepinfer/tokenizer/incremental_detokenizer.h"

namespace deepinfer {

struct RequestState;

// One sample: its tokens, sampler, detokenizer, stop checker and grammar. Its model state lives
// in the runner's pages, which the scheduler's KvManager hands out under seq_id.
struct SeqState {
  uint64_t seq_id = 0;
  RequestState* req = nullptr;
  int index = 0;                // 0..n-1
  std::vector<int32_t> tokens;  // prompt + generated
  std::unique_ptr<sample::SequenceSampler> sampler;
  std::unique_ptr<sample::StopChecker> stop;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  std::unique_ptr<SequenceConstraint> constraint;  // so_args
  CompletionOutput out;
  bool finished = false;
  // n > 1: samples 1..n-1 wait until sample 0 has computed the prompt, then fork from it (its
  // pages shared or copied, its last-position logits) instead of recomputing the prompt.
  bool parked = false;
  SeqCacheState cache;  // its key chain and snapshots in the prefix cache
  // Speculative decoding: this step's row when it verifies drafts (the sampled token, then the
  // drafts), and how many drafts became output tokens so far.
  std::vector<int32_t> spec_row;
  int64_t accepted_drafts = 0;
};

struct RequestState {
  GenerateRequest req;
  Engine::Callback cb;
  std::vector<int32_t> prompt;
  std::vector<std::unique_ptr<SeqState>> seqs;
  int num_finished = 0;
  bool touched = false;
  // so_args, compiled at submit; the mask cache is shared with every request of this so_args.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::shared_ptr<const grammar::TokenizerInfo> grammar_info;
  std::shared_ptr<grammar::MaskCache> mask_cache;
  Status status;  // not ok: ended on this error while running (RequestOutput::status)
  kv::Retention retention = kv::Retention::kChat;
  int64_t cached_tokens = -1;                      // set when sample 0 first starts (-1: not yet)
  std::shared_ptr<const SequenceHandoff> handoff;  // export_state: the state, once read
};

}  // namespace deepinfer
