// Issue 14: grammars that would stall the engine. Compile-time size limits (their documented
// values, 100000 expanded and 1048576 IR elements), the matcher's work budget (masks checked
// against a brute-force Earley oracle) and error messages that never cut a UTF-8 character.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/grammar_matcher.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer::grammar {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void expect_rejected(const StatusOr<Grammar>& g, const std::vector<std::string>& parts) {
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().to_string();
  for (const std::string& p : parts)
    EXPECT_TRUE(contains(g.status().message(), p)) << g.status().message() << " lacks " << p;
}

TEST(CompileLimits, PathologicalRegexIsRejectedNamingTheLimit) {
  expect_rejected(parse_regex("(a{0,999}){0,999}a{30}"),
                  {"regex expands to more than 100000 grammar elements", "(limit 100000"});
}

TEST(CompileLimits, PathologicalJsonSchemaPatternIsRejectedNamingThePathAndLimit) {
  expect_rejected(
      compile_json_schema_text(R"({"type": "object", "properties": {"p":
                      {"type": "string", "pattern": "(a{0,999}){0,999}a{30}"}}})"),
      {"json schema pattern at /properties/p: regex expands to more than 100000", "(limit 100000"});
}

TEST(CompileLimits, NestedEbnfRepetitionIsRejectedAlsoThroughARuleReference) {
  expect_rejected(parse_ebnf("root ::= (\"a\"{0,999}){0,999} \"a\"{30}"),
                  {"ebnf: the grammar expands to more than 100000", "(limit 100000"});
  expect_rejected(parse_ebnf("root ::= x{0,999} \"a\"{30}\nx ::= \"a\"{0,999}"),
                  {"ebnf: the grammar expands to more than 100000", "(limit 100000"});
}

// The expanded size written out by hand: (ab){500} is 1000 elements, a hundred of them 100000,
// which is the limit itself; one more element is over it.
TEST(CompileLimits, TheExpandedLimitIsInclusive) {
  EXPECT_TRUE(parse_regex("((ab){500}){100}").ok());
  expect_rejected(parse_regex("((ab){500}){100}c"), {"more than 100000", "(limit 100000"});
  EXPECT_TRUE(parse_ebnf("root ::= ((\"a\" \"b\"){500}){100}").ok());
  expect_rejected(parse_ebnf("root ::= ((\"a\" \"b\"){500}){100} \"c\""), {"(limit 100000"});
}

// Hand-made IR: a recursive reference counts 1, a shared rule counts once per reference.
TEST(CompileLimits, ExpandedSizeInlinesSharedRulesAndCutsRecursion) {
  ByteSet a;
  a.set('a');
  const Element byte{Element::Kind::kBytes, 0};
  auto ref = [](uint32_t r) { return Element{Element::Kind::kRule, r}; };
  Grammar recursive;
  recursive.byte_sets = {a};
  recursive.rules = {Rule{"r", {Sequence{byte, ref(0)}, Sequence{}}}};
  EXPECT_EQ(expanded_size(recursive, 1000), 2u);
  Grammar dag;  // r0 ::= r1 r1; r1 ::= r2 r2 r2; r2 ::= a a
  dag.byte_sets = {a};
  dag.rules = {Rule{"r0", {Sequence{ref(1), ref(1)}}},
               Rule{"r1", {Sequence{ref(2), ref(2), ref(2)}}}, Rule{"r2", {Sequence{byte, byte}}}};
  EXPECT_EQ(expanded_size(dag, 1000), 12u);
  EXPECT_EQ(num_elements(dag), 7u);
  EXPECT_EQ(expanded_size(dag, 5), 6u);  // stops early: cap + 1
}

// Many large counts, each fine alone, add up in the IR: the builder stops at the limit instead
// of building gigabytes, and the error names the schema that crossed it.
TEST(CompileLimits, ManyLargeBoundsHitTheGrammarElementLimit) {
  std::string pattern;
  for (int i = 0; i < 600; ++i) pattern += "[a-z]{0,1000}-";
  expect_rejected(parse_regex(pattern), {"regex has more than 1048576", "(limit 1048576)"});
  nlohmann::ordered_json schema = {{"type", "object"}};
  for (int i = 0; i < 80; ++i)
    schema["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 10000}};
  expect_rejected(compile_json_schema(schema),
                  {"json schema at /properties/p", "the schema has more than 1048576 grammar",
                   "(limit 1048576)"});
  // A few such bounds (the corpus has one per schema) are fine.
  schema["properties"] = {{"a", {{"type", "string"}, {"maxLength", 10000}}},
                          {"b", {{"type", "string"}, {"maxLength", 10000}}}};
  auto two = compile_json_schema(schema);
  EXPECT_TRUE(two.ok()) << two.status().to_string();
}

// An HTTP server serializes these messages into JSON, which must be valid UTF-8: a quoted
// character is a whole code point, or an escape for a byte that starts none.
TEST(ErrorMessages, QuoteWholeCodePointsNeverACutUtf8Sequence) {
  struct Case {
    StatusOr<Grammar> result;
    std::string quoted;
  };
  const Case cases[] = {
      {parse_regex("(?\xC3\xA9)"), "'(?\xC3\xA9'"},
      {parse_regex("(?\xF0\x9F\x98\x80)"), "'(?\xF0\x9F\x98\x80'"},
      {parse_regex("(?\xFF)"), "'(?\\xFF'"},
      {compile_json_schema_text("{\"type\": \"string\", \"pattern\": \"(?\xC3\xA9)\"}"),
       "'(?\xC3\xA9'"},
      {parse_ebnf("root ::= \"a\" \xC3\xA9"), "'\xC3\xA9'"},
      {parse_ebnf("root ::= \"a\" \xE2\x82\xAC\n"), "'\xE2\x82\xAC'"},
      {parse_ebnf("root ::= \"\\\xC3\xA9\""), "'\\\xC3\xA9'"},
      {parse_ebnf("root ::= \"a\" \xFF"), "'\\xFF'"},
      {parse_ebnf("root ::= \"a\" \xC3"), "'\\xC3'"},          // cut at the end
      {parse_ebnf("root ::= \"a\" \xED\xA0\x80"), "'\\xED'"},  // a surrogate's encoding
      {parse_ebnf("root ::= \"a\" \xC0\xAF"), "'\\xC0'"},      // overlong
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.quoted;
    const std::string& m = c.result.status().message();
    EXPECT_TRUE(contains(m, c.quoted)) << m << " should quote " << c.quoted;
    EXPECT_NO_THROW((void)nlohmann::json(m).dump()) << m;
  }
}

// A tiny vocabulary whose masks are cheap to check by brute force.
std::shared_ptr<const TokenizerInfo> tiny_vocab() {
  std::vector<std::string> vocab = {"<eos>", "x", "xa", "a", "aa", "aaa", "b", "ab", "aab", "c"};
  auto ti = TokenizerInfo::from_vocab(vocab, std::vector<bool>(vocab.size(), true), {0});
  EXPECT_TRUE(ti.ok());
  return *ti;
}

// The oracle: a fresh unbudgeted Earley matcher over the accepted bytes tries each token.
std::vector<bool> brute_force_mask(const std::shared_ptr<const CompiledGrammar>& g,
                                   const TokenizerInfo& info, const std::string& prefix,
                                   bool stopped) {
  std::vector<bool> out(info.vocab_size(), false);
  if (stopped) return out;
  EarleyMatcher m(g);
  EXPECT_TRUE(m.accept_bytes(prefix));
  for (int32_t id = 0; id < info.vocab_size(); ++id) {
    if (info.is_stop(id)) {
      out[id] = m.can_terminate();
    } else if (m.accept_bytes(info.token_bytes(id))) {
      out[id] = true;
      m.rollback_bytes(info.token_bytes(id).size());
    }
  }
  return out;
}

std::vector<bool> bits(const std::vector<uint32_t>& mask, int32_t n) {
  std::vector<bool> out(n);
  for (int32_t id = 0; id < n; ++id) out[id] = (mask[id / 32] >> (id % 32)) & 1;
  return out;
}

std::shared_ptr<const CompiledGrammar> compiled(StatusOr<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

// x(a?){0,300}b: every iteration may be empty, so each Earley set closes hundreds of nullable
// completions, each scanning the set: a few hundred thousand item operations per byte, small
// enough to check, large enough for small budgets to run out anywhere.
TEST(WorkBudget, AMaskOverBudgetFailsChangesNothingAndLeavesTheSharedCacheExact) {
  auto info = tiny_vocab();
  auto g = compiled(parse_regex("x(a?){0,300}b"));
  const int32_t n = info->vocab_size();
  int failures = 0, successes = 0;
  for (uint64_t budget : {uint64_t{1}, uint64_t{1000}, uint64_t{100000}, uint64_t{400000},
                          uint64_t{2000000}, uint64_t{0}}) {
    auto shared = std::make_shared<MaskCache>(info->mask_words(), 1 << 20);
    GrammarMatcher tight(g, info, shared, budget);
    GrammarMatcher wide(g, info, shared, /*work_budget=*/0);  // unlimited, same cache and DFA
    std::vector<uint32_t> mask(info->mask_words());
    std::string prefix;
    for (const char* t : {"x", "aa", "a", "aaa", "b"}) {
      const std::vector<bool> want = brute_force_mask(g, *info, prefix, false);
      if (tight.fill_next_token_bitmask(mask.data())) {
        ++successes;
        EXPECT_FALSE(tight.work_budget_exceeded());
        if (budget != 0) {
          EXPECT_LE(tight.last_work(), budget);
        }
        EXPECT_EQ(bits(mask, n), want) << "budget " << budget << " after '" << prefix << "'";
      } else {
        ++failures;
        EXPECT_NE(budget, 0u);
        EXPECT_TRUE(tight.work_budget_exceeded());
        EXPECT_EQ(bits(mask, n), std::vector<bool>(n, false));
        EXPECT_EQ(tight.num_tokens(), wide.num_tokens());
      }
      // Whatever the tight matcher learned or gave up on, the shared machinery is exact.
      ASSERT_TRUE(wide.fill_next_token_bitmask(mask.data()));
      EXPECT_EQ(bits(mask, n), want) << "budget " << budget << " after '" << prefix << "'";
      int32_t id = 0;
      while (info->token_bytes(id) != t) ++id;
      ASSERT_TRUE(want[id]);
      ASSERT_TRUE(wide.accept_token(id));
      if (!tight.accept_token(id)) {
        EXPECT_TRUE(tight.work_budget_exceeded());
        break;  // the engine ends the request here
      }
      EXPECT_TRUE(tight.can_terminate() == wide.can_terminate());
      prefix += t;
    }
  }
  EXPECT_GT(failures, 0);
  EXPECT_GT(successes, 0);
}

// A budget smaller than building the start state: the matcher refuses everything, never crashes.
TEST(WorkBudget, AMatcherOutOfWorkFromTheStartRefusesEverything) {
  auto info = tiny_vocab();
  GrammarMatcher m(compiled(parse_regex("(a?){0,300}b")), info, nullptr, /*work_budget=*/10);
  EXPECT_TRUE(m.work_budget_exceeded());
  std::vector<uint32_t> mask(info->mask_words(), ~0u);
  EXPECT_FALSE(m.fill_next_token_bitmask(mask.data()));
  EXPECT_EQ(bits(mask, info->vocab_size()), std::vector<bool>(info->vocab_size(), false));
  EXPECT_FALSE(m.accept_token(6));  // "b"
  EXPECT_TRUE(m.work_budget_exceeded());
  EXPECT_EQ(m.num_tokens(), 0u);
}

// Random budgets, grammars, walks and rollbacks, matchers of different budgets sharing one
// cache: every mask that completes equals the oracle, and every one that runs out changes
// nothing (the oracle still agrees with the state afterwards).
TEST(WorkBudget, RandomBudgetsNeverCorruptStateOrCrash) {
  auto info = tiny_vocab();
  const int32_t n = info->vocab_size();
  const char* grammars[] = {"x(a?){0,60}b", "x((a|aa)*)*b?c", "(x|xa)(a{0,5}){0,8}(b|ab|aab)",
                            "x(a*b?)*c"};
  std::mt19937_64 rng(14);
  int failures = 0;
  for (const char* pattern : grammars) {
    auto g = compiled(parse_regex(pattern));
    auto shared = std::make_shared<MaskCache>(info->mask_words(), 1 << 20);
    for (int walk = 0; walk < 12; ++walk) {
      const uint64_t budget = 1 + rng() % 30000;
      GrammarMatcher m(g, info, shared, budget);
      std::vector<uint32_t> mask(info->mask_words());
      std::vector<std::string> accepted;  // token bytes; "" = the stop token
      for (int step = 0; step < 12; ++step) {
        std::string prefix;
        for (const auto& t : accepted) prefix += t;
        const bool stopped = !accepted.empty() && accepted.back().empty();
        const std::vector<bool> want = brute_force_mask(g, *info, prefix, stopped);
        if (!m.fill_next_token_bitmask(mask.data())) {
          ++failures;
          EXPECT_TRUE(m.work_budget_exceeded());
          EXPECT_EQ(m.num_tokens(), accepted.size());
          if (rng() % 2 && !accepted.empty()) {  // the state is intact: rolling back works
            m.rollback(1);
            accepted.pop_back();
          }
          continue;
        }
        EXPECT_EQ(bits(mask, n), want) << pattern << " budget " << budget << " '" << prefix << "'";
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < n; ++id)
          if (want[id]) ids.push_back(id);
        if (ids.empty()) break;
        const int32_t id = ids[rng() % ids.size()];
        if (m.accept_token(id)) {
          accepted.push_back(info->is_stop(id) ? "" : info->token_bytes(id));
        } else {
          EXPECT_TRUE(m.work_budget_exceeded()) << pattern << " token " << id;
          ++failures;
        }
      }
    }
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace deepinfer::grammar
