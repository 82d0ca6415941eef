#include "deepinfer/engine/constrained_decoding.h"

#include <limits>

#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer {

StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compile_structured_output(
    const sample::StructuredOutput& so, const grammar::JsonSchemaOptions& json,
    uint32_t max_lookahead) {
  using Kind = sample::StructuredOutput::Kind;
  StatusOr<grammar::Grammar> g = unimplemented("unreachable");
  switch (so.kind) {
    case Kind::kRegex:
      g = grammar::parse_regex(so.spec);
      break;
    case Kind::kEbnf:
      g = grammar::parse_ebnf(so.spec);
      break;
    case Kind::kJsonSchema:
      g = grammar::compile_json_schema_text(so.spec, json);
      break;
    case Kind::kJsonObject:
      g = grammar::json_object_grammar(json);
      break;
  }
  if (!g.ok()) {
    return Status(g.status().code(), std::string("so_args.") + sample::kind_name(so.kind) + ": " +
                                         g.status().message());
  }
  return std::shared_ptr<const grammar::CompiledGrammar>(
      std::make_shared<grammar::CompiledGrammar>(std::move(*g), max_lookahead));
}

StatusOr<GrammarCache::Entry> GrammarCache::get(const sample::StructuredOutput& so,
                                                const grammar::TokenizerInfo& info) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first == so) {
        lru_.splice(lru_.begin(), lru_, it);
        return it->second;
      }
    }
  }
  // Compiled outside the lock: a slow schema does not hold up other submitters.
  ASSIGN_OR_RETURN(auto g, compile_structured_output(so, json_, info.max_token_bytes()));
  Entry e{std::move(g), std::make_shared<grammar::MaskCache>(
                            info.mask_words(), grammar::GrammarMatcher::kDefaultCacheBytes)};
  std::lock_guard<std::mutex> lock(mu_);
  lru_.emplace_front(so, e);
  if (lru_.size() > max_entries_) lru_.pop_back();
  return e;
}

SequenceConstraint::SequenceConstraint(std::shared_ptr<const grammar::CompiledGrammar> g,
                                       std::shared_ptr<const grammar::TokenizerInfo> info,
                                       std::shared_ptr<grammar::MaskCache> cache,
                                       uint64_t work_budget)
    : matcher_(std::move(g), info, std::move(cache), work_budget),
      mask_(info->mask_words()),
      work_budget_(work_budget) {}

Status SequenceConstraint::budget_error() const {
  const std::string n = std::to_string(work_budget_);
  return resource_exhausted(
      "so_args: the grammar's work budget ran out: one token needed more than " + n +
      " Earley item operations (limit " + n +
      " per token); the grammar is too ambiguous or too large at this point of the output");
}

Status SequenceConstraint::apply(float* logits, int64_t vocab) {
  if (!matcher_.fill_next_token_bitmask(mask_.data())) return budget_error();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t words = static_cast<int64_t>(mask_.size());
  for (int64_t w = 0; w * 32 < vocab; ++w) {
    const uint32_t bits = w < words ? mask_[w] : 0;
    if (bits == 0xFFFFFFFFu) continue;
    const int64_t end = std::min<int64_t>(vocab, (w + 1) * 32);
    for (int64_t id = w * 32; id < end; ++id) {
      if (!((bits >> (id - w * 32)) & 1)) logits[id] = kNegInf;
    }
  }
  return ok_status();
}

}  // namespace deepinfer
