// The engine's per-sample output steps after a forward: mask the logits by the sample's grammar,
// sample, advance the grammar, then detokenize, apply the stop rules and record logprobs.
// Engine-thread only; allocates nothing per token beyond the output it appends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request_state.h"

namespace deepinfer {

// The token a sample takes and what its grammar said about it.
struct TokenChoice {
  sample::SampleResult result;
  bool grammar_stop = false;  // the grammar finished with this eos
  bool grammar_dead = false;  // the grammar allowed nothing, not even eos
};

class OutputProcessor {
 public:
  // scripted: test hook (EngineArgs::debug_scripted_output): when not empty every sample's
  // tokens are these, then eos, instead of sampled ones (the grammar is then ignored).
  OutputProcessor(int64_t vocab_size, int32_t eos, std::vector<int32_t> scripted)
      : vocab_(vocab_size), eos_(eos), scripted_(std::move(scripted)) {}

  // Samples s's next token from `logits` (vocab floats, masked in place by its grammar). Not ok
  // (resource_exhausted) when the grammar ran out of its work budget: the caller ends the
  // request.
  StatusOr<TokenChoice> choose(SeqState& s, float* logits) const;
  // Whether s's next token is just the argmax of its logits (see SequenceSampler::
  // argmax_suffices; no grammar, one sample per request, no scripted output), so the runner need
  // not return the logits.
  bool argmax_suffices(const SeqState& s) const;
  // choose() for such a sample, given the runner's argmax.
  TokenChoice take_argmax(SeqState& s, int32_t token) const;

  // The first token of an imported sequence (GenerateRequest::import_state), taken as choose()
  // took it on the exporting engine: the grammar, the sampler (and its seeded stream) and the
  // tokens advance the same way. Not ok when the grammar ran out of its work budget.
  StatusOr<TokenChoice> replay(SeqState& s, const SequenceHandoff& h) const;

  // Appends the chosen token to s.out and s.tokens, with its text after the stop rules.
  // length_reached: the scheduler ended the sample at max_tokens. Returns the finish reason when
  // the sample is done ("stop", "length", "abort"), else an empty string.
  std::string append(SeqState& s, const TokenChoice& c, bool length_reached) const;

 private:
  bool scripted() const { return !scripted_.empty(); }
  int64_t vocab_;
  int32_t eos_;
  std::vector<int32_t> scripted_;
};

// The request's update for its callback: every sample's output so far (their deltas are then
// cleared), usage, status, and on its final output its handoff; the request is untouched again.
RequestOutput take_output(RequestState& r);

}  // namespace deepinfer
