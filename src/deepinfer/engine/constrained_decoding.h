// Structured output in the engine: so_args -> compiled grammar (at submit, so errors reach the
// caller), and per sample a matcher whose token mask is applied to the logits before sampling.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar_matcher.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/sample/structured_output.h"

namespace deepinfer {

// Errors keep the front end's code and name the field: "so_args.regex: regex offset 3: ...".
// `json` shapes json_schema and json_object output (whitespace). max_lookahead: the longest
// token of the tokenizer it will be matched with (grammar::CompiledGrammar).
StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compile_structured_output(
    const sample::StructuredOutput& so, const grammar::JsonSchemaOptions& json = {},
    uint32_t max_lookahead = grammar::CompiledGrammar::kMaxLookahead);

// Compiled so_args shared by the requests that repeat them: the grammar is compiled once and
// its mask cache stays warm (states recur across requests of one schema). get() is thread-safe;
// the MaskCache it returns must only be used on the engine thread.
class GrammarCache {
 public:
  struct Entry {
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    std::shared_ptr<grammar::MaskCache> masks;
  };
  explicit GrammarCache(size_t max_entries, grammar::JsonSchemaOptions json = {})
      : max_entries_(max_entries), json_(json) {}
  // The grammar is compiled for `info`'s longest token, its mask cache for its vocabulary.
  StatusOr<Entry> get(const sample::StructuredOutput& so, const grammar::TokenizerInfo& info);

 private:
  std::mutex mu_;
  size_t max_entries_;
  grammar::JsonSchemaOptions json_;
  std::list<std::pair<sample::StructuredOutput, Entry>> lru_;  // most recent first
};

// One sample's constraint. Engine-thread only.
class SequenceConstraint {
 public:
  // work_budget: GrammarMatcher's per-mask / per-token work budget (tests lower it).
  SequenceConstraint(std::shared_ptr<const grammar::CompiledGrammar> g,
                     std::shared_ptr<const grammar::TokenizerInfo> info,
                     std::shared_ptr<grammar::MaskCache> cache,
                     uint64_t work_budget = grammar::GrammarMatcher::kDefaultWorkBudget);
  // Sets every token the grammar does not allow now to -inf (ids past the tokenizer's
  // vocabulary, e.g. padding rows of the model's vocabulary, included). Not ok
  // (resource_exhausted, see budget_error) when the mask ran out of work: the logits are then
  // untouched and the caller ends the request.
  Status apply(float* logits, int64_t vocab);
  // False when the token is not allowed (the caller then ends the sample), or when accepting it
  // ran out of work (budget_exceeded(); the caller then ends the request).
  bool accept(int32_t token) { return matcher_.accept_token(token); }
  bool budget_exceeded() const { return matcher_.work_budget_exceeded(); }
  // The error a request ends on when its grammar runs out of work, naming the budget.
  Status budget_error() const;
  bool can_terminate() const { return matcher_.can_terminate(); }
  bool is_terminated() const { return matcher_.is_terminated(); }

 private:
  grammar::GrammarMatcher matcher_;
  std::vector<uint32_t> mask_;
  uint64_t work_budget_;
};

}  // namespace deepinfer
