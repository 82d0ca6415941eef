// String constraints that need more than one regex (issue 21): anchors inside alternatives, the
// language product (pattern with format, a length bound the pattern does not meet, leading
// lookaheads, `not: {pattern}`). Expected verdicts are worked out by hand from ECMA-262 /
// Python `re.search` semantics and the JSON Schema specification; "valid but not written"
// cases are marked.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/language_product.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> compile(const std::string& schema) {
  auto g = compile_json_schema_text(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().to_string();
  if (!g.ok()) return nullptr;
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  EarleyMatcher m(g);
  return m.accept_bytes(text) && m.can_terminate();
}

struct Case {
  std::string schema;
  std::vector<std::string> good, bad;
};

void check_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    auto g = compile(c.schema);
    if (!g) continue;
    for (const std::string& t : c.good)
      EXPECT_TRUE(accepts(g, t)) << c.schema << " should take " << t;
    for (const std::string& t : c.bad) EXPECT_FALSE(accepts(g, t)) << c.schema << " took " << t;
  }
}

void expect_error(const std::string& schema, StatusCode code, const std::string& needle) {
  auto g = compile_json_schema_text(schema);
  ASSERT_FALSE(g.ok()) << schema;
  EXPECT_EQ(g.status().code(), code) << g.status().to_string();
  EXPECT_NE(g.status().message().find(needle), std::string::npos)
      << g.status().message() << " lacks " << needle;
}

bool regex_accepts(const std::string& pattern, const std::string& text) {
  auto g = parse_regex(pattern);
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
  if (!g.ok()) return false;
  EarleyMatcher m(std::make_shared<CompiledGrammar>(std::move(*g)));
  return m.accept_bytes(text) && m.can_terminate();
}

TEST(RegexAnchors, AnchorsThatFullMatchMakesNoOpsAreAccepted) {
  // Each alternative anchored at both ends: the full matches are exactly the alternatives.
  EXPECT_TRUE(regex_accepts("^in$|^out$", "in"));
  EXPECT_TRUE(regex_accepts("^in$|^out$", "out"));
  EXPECT_FALSE(regex_accepts("^in$|^out$", "inout"));
  EXPECT_FALSE(regex_accepts("^in$|^out$", ""));
  // Groups at the start / end, '$' before ')' of a final group, an empty anchored alternative.
  EXPECT_TRUE(regex_accepts("(^[0-9]+\\.[0-9]+$)|^$|[/]", "4.27"));
  EXPECT_TRUE(regex_accepts("(^[0-9]+\\.[0-9]+$)|^$|[/]", ""));
  EXPECT_TRUE(regex_accepts("(^[0-9]+\\.[0-9]+$)|^$|[/]", "/"));
  EXPECT_FALSE(regex_accepts("(^[0-9]+\\.[0-9]+$)|^$|[/]", "4."));
  EXPECT_TRUE(regex_accepts("^(\\d{4})$|^([a-z]{2}(-[A-Z]{2})?)$|^neutral$", "en-US"));
  EXPECT_TRUE(regex_accepts("(^a)?b", "ab"));  // '^' at 0, then b
  EXPECT_TRUE(regex_accepts("(^a)?b", "b"));
  // Anchors that would need to hold mid-string are refused, not dropped.
  for (const char* p : {"(a$)b", "(^a)*", "(^a)+b", "a(^b)", "a?^b", "(a$)?b"}) {
    auto g = parse_regex(p);
    ASSERT_FALSE(g.ok()) << p;
    EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented) << p;
  }
}

TEST(LanguageProduct, IntersectionAndComplementAreExact) {
  // [a-c]+ minus the strings that start with "ab": checked against every string up to length 4.
  std::vector<LanguageTerm> terms;
  terms.push_back({*parse_regex("[a-c]+"), false});
  terms.push_back({*parse_regex("ab(?:.|\\n)*"), true});
  terms.push_back({*parse_regex("(?:.|\\n){0,3}"), false});
  auto g = intersect_languages(terms, 1000);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto cg = std::make_shared<CompiledGrammar>(std::move(*g));
  std::vector<std::string> all = {""};
  for (int len = 1; len <= 4; ++len) {
    std::vector<std::string> next;
    for (const std::string& s : all)
      if (s.size() == static_cast<size_t>(len - 1))
        for (char c : std::string("abcd")) next.push_back(s + c);
    all.insert(all.end(), next.begin(), next.end());
  }
  for (const std::string& s : all) {
    const bool in_abc = !s.empty() && s.find_first_not_of("abc") == std::string::npos;
    const bool expected = in_abc && s.rfind("ab", 0) != 0 && s.size() <= 3;
    EXPECT_EQ(accepts(cg, s), expected) << s;
  }
  // Empty products and oversized ones are errors, not grammars.
  std::vector<LanguageTerm> empty;
  empty.push_back({*parse_regex("a+"), false});
  empty.push_back({*parse_regex("b+"), false});
  auto e = intersect_languages(empty, 1000);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  std::vector<LanguageTerm> big;
  big.push_back({*parse_regex("[a-z]{0,500}"), false});
  auto b = intersect_languages(big, 100);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnimplemented);
}

TEST(JsonSchemaStrings, PatternWithFormatIsTheirIntersection) {
  check_cases({
      // RFC 3986 URI whose text starts with http:// or https://.
      {R"({"type":"string","format":"uri","pattern":"^https?://"})",
       {R"("https://example.com/a")", R"("http://x.org")"},
       {R"("ftp://example.com")", R"("http:/x")", R"("https://a b")", R"("")"}},
      // A format regex (our subset) and a pattern: a non-empty run of the pattern's class.
      {R"({"type":"string","format":"regex","pattern":"^[a-zA-Z0-9_-]+$"})",
       {R"("lib-wrapper")", R"("dnd5e")"},
       {R"("")", R"("a b")", R"("a.b")"}},
  });
}

TEST(JsonSchemaStrings, OversizedProductsAreRefused) {
  // email (labels of up to 63) times a pattern counting to 64 and 255: past the state cap.
  expect_error(R"({"type":"string","format":"email","pattern":"^[^@]{1,64}@[^@]{1,255}$"})",
               StatusCode::kUnimplemented, "states");
}

TEST(JsonSchemaStrings, LengthBoundsIntersectThePattern) {
  check_cases({
      {R"({"type":"string","pattern":"^[a-z]*$","minLength":2})",
       {R"("ab")", R"("abcdefgh")"},
       {R"("")", R"("a")", R"("aB")"}},
      // A pattern that also matches the empty string, minLength 1 (prometheus durations).
      {R"({"type":["string","null"],"minLength":1,
          "pattern":"^((([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?|0)$"})",
       {R"("5m")", R"("1h30m")", R"("0")", "null"},
       {R"("")", R"("m")", R"("5x")"}},
      {R"({"type":"string","format":"regex","minLength":1})", {R"("a")", R"("^a.*$")"}, {R"("")"}},
  });
}

TEST(JsonSchemaStrings, LeadingLookaheadsAreIntersectedOrExcluded) {
  check_cases({
      // ^(?!org\.): no string that starts with "org." (a class name outside that package).
      {R"({"type":"string","pattern":"^(?!org\\.)([a-zA-Z_$][a-zA-Z0-9_$]*\\.)*[a-zA-Z_$][a-zA-Z0-9_$]*$"})",
       {R"("com.example.Main")", R"("org")", R"("orgx.Main")", R"("Main")"},
       {R"("org.Main")", R"("org.a.B")", R"("1abc")", R"("a..b")"}},
      // ^(?=.*[0-9]): some digit somewhere.
      {R"({"type":"string","pattern":"^(?=.*[0-9])[a-z0-9]{2,4}$"})",
       {R"("a1")", R"("9zzz")"},
       {R"("ab")", R"("a")", R"("a1234")"}},
  });
  // A negative lookahead whose body our ASCII \d could read more narrowly than the validators.
  expect_error(R"({"type":"string","pattern":"^(?!\\d)[a-z0-9]+$"})", StatusCode::kUnimplemented,
               "'pattern'");
}

TEST(JsonSchemaStrings, NotPatternExcludesEveryStringItFindsAMatchIn) {
  check_cases({
      // Relative paths: no drive letter, no leading slash (the pattern searches from the start).
      {R"js({"type":"string","minLength":1,"not":{"pattern":"^(?:[A-Za-z]:|/|\\\\)"}})js",
       {R"("a/b")", R"("skills/x.md")", R"("ab:c")"},
       {R"("")", R"("/x")", R"("C:x")", R"("a:b")", R"("\\server")"}},
      // Anchored at the start only: no string that starts with "ab". {pattern} holds for every
      // non-string, so its negation rejects them all.
      {R"({"not":{"pattern":"^ab"}})",
       {R"("")", R"("ba")", R"("a b")", R"("xab")"},
       {R"("ab")", R"("abc")", "1", "null", "{}"}},
      // Several nots in an allOf (reserved words), beside a pattern.
      {R"({"type":"string","pattern":"^[a-z]+$","allOf":[{"not":{"pattern":"^if$"}},
          {"not":{"pattern":"^in$"}},{"not":{"pattern":"^for$"}}]})",
       {R"("i")", R"("iff")", R"("fo")", R"("forx")"},
       {R"("if")", R"("in")", R"("for")", R"("")"}},
      // Beside an enum the values themselves are checked.
      {R"({"enum":["a","b1",1],"not":{"pattern":"[0-9]"}})", {R"("a")"}, {R"("b1")", "1"}},
  });
  // \d is ASCII here but Unicode in Python's re: such a pattern cannot be excluded soundly.
  expect_error(R"({"type":"string","not":{"pattern":"^\\d"}})", StatusCode::kUnimplemented,
               "'not'");
  // A pattern the validators search for anywhere is not excluded (not done yet).
  expect_error(R"({"type":"string","not":{"pattern":"ab"}})", StatusCode::kUnimplemented, "'not'");
}

// Not a string keyword, but the same issue's coverage: integral multipleOf with bounds.
TEST(JsonSchemaNumbers, MultipleOfWithinBothBoundsIsExact) {
  auto g = compile(R"({"type":"integer","minimum":-40,"exclusiveMaximum":32,"multipleOf":16})");
  ASSERT_NE(g, nullptr);
  for (int v = -60; v <= 60; ++v) {
    const bool in = v % 16 == 0 && v >= -40 && v < 32;
    EXPECT_EQ(accepts(g, std::to_string(v)), in) << v;
  }
  EXPECT_FALSE(accepts(g, "-0"));
  EXPECT_FALSE(accepts(g, "16.0"));  // valid, but integers are written without a fraction
  expect_error(R"({"type":"integer","minimum":0,"multipleOf":16})", StatusCode::kUnimplemented,
               "'multipleOf'");
  expect_error(R"({"type":"integer","minimum":1,"maximum":15,"multipleOf":16})",
               StatusCode::kInvalidArgument, "accepts no value");
}

}  // namespace
}  // namespace deepinfer::grammar
