// Incremental stop handling over detokenized text: stop strings (across token boundaries),
// stop_token_ids, eos, max_tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/sample/sampling_params.h"

namespace deepinfer::sample {

// One per sequence. Rules (vLLM v0 StopChecker, with the noted choices):
// - None of the first min_tokens tokens ends the sequence (eos, stop token or stop string).
// - Checked per token in this order: eos (unless ignore_eos), stop_token_ids, stop strings,
//   then max_tokens. So a stop on the last allowed token reports "stop", not "length".
// - eos / stop token: the token's own text is dropped unless include_stop_str_in_output;
//   text held back before it is released.
// - Stop string: the earliest match in the text wins (ties: first in `stop`); the emitted text
//   ends before it (or after it with include_stop_str_in_output); anything after is dropped.
// - Otherwise the longest suffix that is a proper prefix of some stop string is held back.
// When push() reports finished, it has already returned all the text there will be.
class StopChecker {
 public:
  StopChecker(const SamplingParams& p, int32_t eos_token_id);

  // token and its text delta (complete UTF-8 from the incremental detokenizer). Returns the
  // text safe to emit now. Sets *finished and, when finished, *reason ("stop" or "length");
  // reason may be null. After finishing, further pushes return "" and keep finished.
  std::string push(int32_t token, const std::string& delta, bool* finished, std::string* reason);
  // The sequence ended for an outside reason (e.g. abort, context length): releases the
  // held-back text. Returns "" if push() already finished.
  std::string flush();

  // The stop string, or the stop token id in decimal, that ended the sequence; nullopt for
  // eos, length, or not finished (vLLM's stop_reason).
  std::optional<std::string> matched_stop() const { return matched_; }
  bool finished() const { return finished_; }
  const std::string& finish_reason() const { return reason_; }
  int num_tokens() const { return num_tokens_; }

 private:
  std::string finish(std::string text, const char* reason);
  size_t held_back_length() const;

  std::vector<std::string> stop_;
  std::vector<int32_t> stop_token_ids_;
  int32_t eos_token_id_;
  int max_tokens_;
  int min_tokens_;
  bool include_stop_;
  bool ignore_eos_;
  size_t max_stop_len_ = 0;

  int num_tokens_ = 0;
  std::string pending_;  // received but not yet emitted (a possible stop-string prefix)
  bool finished_ = false;
  std::string reason_;
  std::optional<std::string> matched_;
};

}  // namespace deepinfer::sample
