// JSON Schema front end at the byte level: accepted and rejected documents, numeric ranges
// against arithmetic, and the errors for what is not supported. The token-level acceptance
// corpus is tests/grammar/.
#include "deepinfer/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/json_schema_merge.h"
#include "deepinfer/grammar/json_schema_test_util.h"

namespace deepinfer::grammar {
namespace {

using namespace testing;  // NOLINT: the shared test helpers

TEST(JsonSchema, AcceptsAndRejects) {
  std::vector<Case> cases = {
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
          "required":["b"]})",
       {R"({"b":""})", R"({"a":-3,"b":"x"})", R"({ "a" : 1 , "b" : "y" })"},
       {R"({})", R"({"b":"x","a":1})", R"({"a":1})", R"({"b":"x","c":1})", R"({"b":"x",})"}},
      {R"({"type":"object","additionalProperties":{"type":"boolean"},
          "properties":{"ab":{"type":"null"}}})",
       {R"({})", R"({"ab":null,"a":true,"abc":false})", R"({"x":true})"},
       {R"({"ab":true})", R"({"x":1})"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
       {"[1,2]", "[1, 2, 3]"},
       {"[]", "[1]", "[1,2,3,4]", "[1,]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}]})",
       {"[]", R"(["a"])", R"(["a",true])"},
       {R"([true])", R"(["a",true,1])"}},
      {R"({"enum":["a\"b", 1, null, {"k":[1]}]})",
       {R"("a\"b")", "1", "null", R"({"k":[1]})", R"({ "k" : [ 1 ] })"},
       {R"("ab")", "2", R"({"k":[]})"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("\u00e9\n")", "\"\xF0\x9F\x98\x80\xC3\xA9\"", R"("\ud83d\ude00ab")"},
       {R"("a")", R"("abcd")", R"("\ud83d")"}},
      {R"({"type":"string","pattern":"^a\"b\\\\c$"})", {R"("a\"b\\c")"}, {R"("a"b\c")"}},
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-29")", R"("2023-12-31")"},
       {R"("2023-02-29")", R"("2024-04-31")", R"("0000-01-01")"}},
      {R"({"type":"string","format":"ipv4"})",
       {R"("10.0.0.255")"},
       {R"("256.1.1.1")", R"("01.1.1.1")"}},
      {R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},
          "$ref":"#/$defs/n"})",
       {R"({})", R"({"c":[{},{"c":[{}]}]})"},
       {R"({"c":[1]})"}},
      {R"({"oneOf":[{"type":"object","properties":{"t":{"const":"a"}},"required":["t"]},
                    {"type":"object","properties":{"t":{"const":"b"},"x":{"type":"integer"}},
                     "required":["t"]}]})",
       {R"({"t":"a"})", R"({"t":"b","x":1})"},
       {R"({"t":"c"})"}},
      {R"({"allOf":[{"type":"integer","minimum":0},{"maximum":5}]})", {"0", "5"}, {"-1", "6"}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
      {R"({})", {"1", R"({"any":[true]})"}, {"nul"}},
  };
  for (const Case& c : cases) {
    auto g = compile(c.schema);
    ASSERT_NE(g, nullptr);
    for (const std::string& s : c.good) EXPECT_TRUE(accepts(g, s)) << c.schema << " / " << s;
    for (const std::string& s : c.bad) EXPECT_FALSE(accepts(g, s)) << c.schema << " / " << s;
  }
}

TEST(JsonSchema, PropertyOrderFollowsTheSchemaText) {
  auto g = compile(R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"integer"}},
                       "required":["z","a"]})");
  EXPECT_TRUE(accepts(g, R"({"z":1,"a":2})"));
  EXPECT_FALSE(accepts(g, R"({"a":2,"z":1})"));
}

TEST(JsonSchema, WhitespaceIsBounded) {
  // Bounded (the default): a gap is nothing, one space, or a newline and an indent of <= 16.
  auto g = compile(R"({"type":"array"})");
  EXPECT_TRUE(accepts(g, "[1, 2]"));
  EXPECT_TRUE(accepts(g, "[\n  1,\n  2\n]"));
  EXPECT_TRUE(accepts(g, "[\n" + std::string(16, ' ') + "1\n\t]"));
  EXPECT_FALSE(accepts(g, "[\n" + std::string(17, ' ') + "1]"));
  EXPECT_FALSE(accepts(g, "[  1]"));
  EXPECT_FALSE(accepts(g, "[\n\n1]"));
  EXPECT_FALSE(accepts(g, "[ \n1]"));
  auto obj = compile(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  EXPECT_TRUE(accepts(obj, "{\n  \"a\": 1\n}"));
  EXPECT_FALSE(accepts(obj, "{\n  \"a\":\n\n 1\n}"));
  // Flexible: up to 16 bytes of any JSON whitespace per gap.
  const JsonSchemaOptions flexible{.whitespace = JsonWhitespace::kFlexible};
  auto f = compile(R"({"type":"array"})", flexible);
  EXPECT_TRUE(accepts(f, "[" + std::string(16, ' ') + "]"));
  EXPECT_TRUE(accepts(f, "[\n\n\r\n 1 ]"));
  EXPECT_FALSE(accepts(f, "[" + std::string(17, ' ') + "]"));
  auto object_grammar = [](const JsonSchemaOptions& o) {
    return std::make_shared<const CompiledGrammar>(json_object_grammar(o));
  };
  EXPECT_TRUE(accepts(object_grammar(flexible), "{\n\n}"));
  EXPECT_FALSE(accepts(object_grammar({}), "{\n\n}"));
  auto compact = compile(R"({"type":"array"})", JsonSchemaOptions{.max_whitespace = 0});
  EXPECT_TRUE(accepts(compact, "[1,2]"));
  EXPECT_FALSE(accepts(compact, "[1, 2]"));
}

TEST(JsonSchema, StrictModeClosesListedObjectsAndTuples) {
  const std::string obj = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  const std::string tuple = R"({"type":"array","prefixItems":[{"type":"integer"}]})";
  EXPECT_FALSE(accepts(compile(obj), R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(compile(tuple), "[1,2]"));
  JsonSchemaOptions lax{.strict = false};
  EXPECT_TRUE(accepts(compile(obj, lax), R"({"a":1,"b":2})"));
  EXPECT_TRUE(accepts(compile(tuple, lax), R"([1,"x"])"));
  // Without `properties` an object is open either way.
  EXPECT_TRUE(accepts(compile(R"({"type":"object"})"), R"({"b":2})"));
}

// Integer and number bounds against plain arithmetic over a window of values.
TEST(JsonSchema, NumericRangesMatchArithmetic) {
  struct Bounds {
    const char* keywords;
    double lo, hi;
    bool lo_ex, hi_ex;
  };
  std::vector<Bounds> bounds = {
      {R"("minimum":-37,"maximum":205)", -37, 205, false, false},
      {R"("exclusiveMinimum":-10,"exclusiveMaximum":10)", -10, 10, true, true},
      {R"("minimum":99)", 99, 1e18, false, false},
      {R"("maximum":-100)", -1e18, -100, false, false},
      {R"("minimum":0,"maximum":0)", 0, 0, false, false},
  };
  for (const Bounds& b : bounds) {
    auto gi = compile(std::string(R"({"type":"integer",)") + b.keywords + "}");
    auto gn = compile(std::string(R"({"type":"number",)") + b.keywords + "}");
    ASSERT_NE(gi, nullptr);
    ASSERT_NE(gn, nullptr);
    for (int v = -400; v <= 400; ++v) {
      bool in = (b.lo_ex ? v > b.lo : v >= b.lo) && (b.hi_ex ? v < b.hi : v <= b.hi);
      EXPECT_EQ(accepts(gi, std::to_string(v)), in) << b.keywords << " " << v;
      EXPECT_EQ(accepts(gn, std::to_string(v)), in) << b.keywords << " " << v;
      for (const char* frac : {".5", ".25", ".0"}) {
        double x = v < 0 ? v - std::stod(frac) : v + std::stod(frac);
        if (v == 0) continue;  // "0.5" is checked below through positive v = 0 separately
        bool xin = (b.lo_ex ? x > b.lo : x >= b.lo) && (b.hi_ex ? x < b.hi : x <= b.hi);
        EXPECT_EQ(accepts(gn, std::to_string(v) + frac), xin) << b.keywords << " " << v << frac;
      }
    }
    for (const char* s : {"0.5", "-0.5"}) {
      double x = std::stod(s);
      bool xin = (b.lo_ex ? x > b.lo : x >= b.lo) && (b.hi_ex ? x < b.hi : x <= b.hi);
      EXPECT_EQ(accepts(gn, s), xin) << b.keywords << " " << s;
    }
  }
}

TEST(JsonSchema, UnsupportedKeywordsNameKeywordAndPath) {
  expect_error(
      R"({"type":"object","properties":{"a":{"type":"object","dependentSchemas":{"x":{}}}}})",
      StatusCode::kUnimplemented, "'dependentSchemas' at /properties/a");
  expect_error(R"({"type":"array","unevaluatedItems":false})", StatusCode::kUnimplemented,
               "'unevaluatedItems' at /");
  expect_error(R"({"type":"array","items":{"not":{"minLength":3}}})", StatusCode::kUnimplemented,
               "'not' at /items");
  expect_error(R"({"type":"array","items":{"type":"string"},"uniqueItems":true,"minItems":2})",
               StatusCode::kUnimplemented, "'uniqueItems'");
  expect_error(R"({"type":"number","multipleOf":0.01})", StatusCode::kUnimplemented,
               "'multipleOf'");
  expect_error(R"({"type":"integer","multipleOf":5,"minimum":1})", StatusCode::kUnimplemented,
               "bound on one side only");
  expect_error(R"({"type":"integer","multipleOf":0})", StatusCode::kInvalidArgument,
               "must be a positive number");
  expect_error(R"({"type":"number","minimum":0.5})", StatusCode::kUnimplemented, "'minimum'");
  expect_error(R"({"type":"string","format":"ipv6"})", StatusCode::kUnimplemented, "'ipv6'");
  expect_error(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})",
               StatusCode::kUnimplemented, "'oneOf'");
  expect_error(
      R"({"allOf":[{"type":"array","items":{"type":"string"}},{"items":{"type":"integer"}}]})",
      StatusCode::kUnimplemented, "'items'");
  expect_error(R"({"$ref":"https://example.com/s.json"})", StatusCode::kUnimplemented, "'$ref'");
  expect_error(R"({"$ref":"#/$defs/missing"})", StatusCode::kInvalidArgument, "cannot resolve");
  expect_error(R"({"type":"string","pattern":"(a"})", StatusCode::kInvalidArgument, "pattern");
  expect_error(R"({"type":"strin"})", StatusCode::kInvalidArgument, "unknown type");
  expect_error(R"({"type":"object","properties":{"a":false},"required":["a"]})",
               StatusCode::kInvalidArgument, "accepts no value");
  expect_error("{not json", StatusCode::kInvalidArgument, "not valid JSON");
}

// Members that are no JSON Schema keyword (vendor extensions, typos, `self`) are ignored, as the
// specification says, wherever they stand; names of properties and $defs are data and stay.
TEST(JsonSchema, NonKeywordsAreIgnoredAsTheSpecificationSays) {
  auto g = compile(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true,
      "self":{"href":"x"},"descripton":"typo",
      "properties":{"self":{"type":"integer","x-order":1},"x-vendor":{"type":"string"}},
      "required":["self"],"additionalProperties":false})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, R"({"self":1})"));
  EXPECT_TRUE(accepts(g, R"({"self":1,"x-vendor":"a"})"));
  EXPECT_FALSE(accepts(g, R"({"self":"a"})"));
  EXPECT_FALSE(accepts(g, R"({"self":1,"href":"x"})"));
  // Beside $ref, enum and a union, where only keywords used to be allowed.
  auto r = compile(
      R"({"$defs":{"n":{"type":"integer","x-go-type":"int"}},"$ref":"#/$defs/n","x-note":1})");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(accepts(r, "3"));
  EXPECT_FALSE(accepts(r, R"("a")"));
  auto e = compile(R"({"enum":["a","b"],"x-enum-varnames":["A","B"]})");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(accepts(e, R"("b")"));
  auto u = compile(R"({"anyOf":[{"type":"integer"},{"type":"null"}],"x-nullable":true})");
  ASSERT_NE(u, nullptr);
  EXPECT_TRUE(accepts(u, "null"));
  // Content keywords annotate strings and are ignored too.
  EXPECT_NE(compile(R"({"type":"string","contentEncoding":"base64"})"), nullptr);
}

// draft-04's `id` is its `$id` (ignored at the root); in later drafts `id` is no keyword.
TEST(JsonSchema, Draft04IdIsHonouredByDraft) {
  EXPECT_NE(compile(R"({"$schema":"http://json-schema.org/draft-04/schema#",
                        "id":"http://example.com/s.json","type":"integer"})"),
            nullptr);
  // A bare fragment names the subschema without rebasing references; any other id rebases.
  EXPECT_NE(compile(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"object",
                        "properties":{"a":{"id":"#a","type":"integer"}}})"),
            nullptr);
  expect_error(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"object",
                  "properties":{"a":{"id":"http://example.com/a.json","type":"integer"}}})",
               StatusCode::kUnimplemented, "'$id' at /properties/a");
  auto later = compile(R"({"type":"object","properties":{"a":{"id":"#a","type":"integer"}}})");
  ASSERT_NE(later, nullptr);
  EXPECT_TRUE(accepts(later, R"({"a":1})"));
}

// Draft-04's boolean exclusive bounds and tuple `items` with `additionalItems` (drafts 4 to
// 2019-09) mean what those drafts say.
TEST(JsonSchema, OlderDraftFormsMeanWhatTheirDraftSays) {
  auto g = compile(R"({"type":"integer","minimum":0,"exclusiveMinimum":true,
                       "maximum":5,"exclusiveMaximum":false})");
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(accepts(g, "0"));
  EXPECT_TRUE(accepts(g, "1"));
  EXPECT_TRUE(accepts(g, "5"));
  EXPECT_FALSE(accepts(g, "6"));
  auto t = compile(R"({"type":"array","items":[{"type":"integer"},{"type":"string"}],
                       "additionalItems":{"type":"boolean"}})");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(accepts(t, R"([1,"a"])"));
  EXPECT_TRUE(accepts(t, R"([1,"a",true,false])"));
  EXPECT_FALSE(accepts(t, R"([1,"a",2])"));
  EXPECT_FALSE(accepts(t, R"(["a",1])"));
  auto closed = compile(R"({"type":"array","items":[{"type":"integer"}],"additionalItems":false})");
  ASSERT_NE(closed, nullptr);
  EXPECT_TRUE(accepts(closed, "[1]"));
  EXPECT_FALSE(accepts(closed, "[1,2]"));
}

// Integral multipleOf: 1 makes a number an integer; k > 1 is exact (checked against arithmetic
// for every integer in a range, both signs).
TEST(JsonSchema, IntegralMultipleOfIsExact) {
  auto one = compile(R"({"type":"number","multipleOf":1,"maximum":10})");
  ASSERT_NE(one, nullptr);
  EXPECT_TRUE(accepts(one, "10"));
  EXPECT_FALSE(accepts(one, "1.5"));
  EXPECT_FALSE(accepts(one, "11"));
  for (int k : {2, 3, 7, 10, 12, 25}) {
    auto g = compile(R"({"type":"integer","multipleOf":)" + std::to_string(k) + "}");
    ASSERT_NE(g, nullptr) << k;
    for (int v = -130; v <= 130; ++v)
      EXPECT_EQ(accepts(g, std::to_string(v)), v % k == 0) << v << " multiple of " << k;
    EXPECT_FALSE(accepts(g, "-0"));
    EXPECT_FALSE(accepts(g, "0" + std::to_string(k)));
  }
}

// dependentRequired / draft-07 array `dependencies`: a required property's dependents become
// required; an optional one whose dependents may be missing is never written (sound: every
// output is valid; not complete: such a property cannot appear).
TEST(JsonSchema, DependentRequiredIsSound) {
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
      "c":{"type":"integer"}},"required":["a"],"dependentRequired":{"a":["b"],"b":["c"]}})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":2,"c":3})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));
  auto opt = compile(R"({"type":"object","properties":{"card":{"type":"string"},
      "addr":{"type":"string"}},"dependencies":{"card":["addr"]}})");
  ASSERT_NE(opt, nullptr);
  EXPECT_TRUE(accepts(opt, "{}"));
  EXPECT_TRUE(accepts(opt, R"({"addr":"x"})"));
  EXPECT_FALSE(accepts(opt, R"({"card":"1"})"));
  EXPECT_FALSE(accepts(opt, R"({"card":"1","addr":"x"})"));  // valid, but never written
  // Open objects: the dependent-less name is not written as an additional member either.
  auto open = compile(R"({"type":"object","dependentRequired":{"k":["m"]}})");
  ASSERT_NE(open, nullptr);
  EXPECT_TRUE(accepts(open, R"({"x":1})"));
  EXPECT_FALSE(accepts(open, R"({"k":1})"));
  // {required: [..]} is the array form.
  auto req = compile(R"({"type":"object","properties":{"a":{"type":"integer"},
      "b":{"type":"integer"}},"required":["a"],"dependencies":{"a":{"required":["b"]}}})");
  ASSERT_NE(req, nullptr);
  EXPECT_TRUE(accepts(req, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(req, R"({"a":1})"));
  // Schema dependencies: "a present => the object meets D". An optional a is never written
  // (an object without a meets every dependency of a); a required one is refused.
  auto dep = compile(R"({"type":"object","properties":{"a":{"type":"integer"},
      "b":{"type":"integer"}},"dependencies":{"a":{"properties":{"b":{"minimum":5}}}}})");
  ASSERT_NE(dep, nullptr);
  EXPECT_TRUE(accepts(dep, R"({"b":1})"));
  EXPECT_FALSE(accepts(dep, R"({"a":1,"b":9})"));  // valid, but never written
  EXPECT_FALSE(accepts(dep, R"({"a":1,"b":1})"));  // invalid
  expect_error(R"({"type":"object","required":["a"],"dependencies":{"a":{"minProperties":2}}})",
               StatusCode::kUnimplemented, "schema dependencies of required 'a'");
  // allOf parts' dependencies all hold: names united per key.
  auto both = compile(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"required":["a"],
      "allOf":[{"dependencies":{"a":["b"]}},{"dependencies":{"a":["c"]}}]})");
  ASSERT_NE(both, nullptr);
  EXPECT_TRUE(accepts(both, R"({"a":1,"b":2,"c":3})"));
  EXPECT_FALSE(accepts(both, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(both, R"({"a":1,"c":3})"));
}

// The error names every unsupported keyword of the document with its path, not just the first.
TEST(JsonSchema, TheErrorListsEveryUnsupportedKeyword) {
  auto g = compile_json_schema_text(R"({"type":"object","unevaluatedItems":false,
      "properties":{"a":{"type":"array","contains":{"type":"integer"}},
                    "b":{"type":"object","dependentSchemas":{"x":{}}}}})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  for (const char* want : {"'unevaluatedItems' at /", "'contains' at /properties/a",
                           "'dependentSchemas' at /properties/b"})
    EXPECT_NE(g.status().message().find(want), std::string::npos)
        << g.status().message() << " lacks " << want;
  // A value-level refusal comes first and the keyword-level ones follow.
  auto f = compile_json_schema_text(
      R"({"type":"object","properties":{"h":{"type":"string","format":"ipv6"},"n":{"contains":{}}}})");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("'ipv6'"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("'contains' at /properties/n"), std::string::npos)
      << f.status().message();
}

// patternProperties: listed names a pattern matches take its schema too; additional members take
// every pattern's schema besides additionalProperties (sound whatever their name).
TEST(JsonSchema, PatternPropertiesAreSound) {
  auto closed = compile(R"({"type":"object","properties":{"x-a":{"type":"integer"},
      "b":{"type":"integer"}},"patternProperties":{"^x-":{"minimum":0}},"required":["x-a","b"]})");
  ASSERT_NE(closed, nullptr);
  EXPECT_TRUE(accepts(closed, R"({"x-a":1,"b":-1})"));
  EXPECT_FALSE(accepts(closed, R"({"x-a":-1,"b":1})"));
  auto extra = compile(R"({"type":"object","patternProperties":{"^n_":{"type":"integer"}},
      "additionalProperties":{"type":"integer","minimum":5}})");
  ASSERT_NE(extra, nullptr);
  EXPECT_TRUE(accepts(extra, R"({"n_a":7,"z":9})"));
  EXPECT_FALSE(accepts(extra, R"({"n_a":"s"})"));
  EXPECT_FALSE(accepts(extra, R"({"z":1})"));
  auto open = compile(R"({"type":"object","patternProperties":{"^s":{"type":"string"}}})");
  ASSERT_NE(open, nullptr);
  EXPECT_TRUE(accepts(open, R"({"sa":"x","b":"y"})"));
  EXPECT_FALSE(accepts(open, R"({"sa":1})"));
  expect_error(R"({"type":"object","patternProperties":{"(?<=a)b":{}}})",
               StatusCode::kUnimplemented, "pattern '(?<=a)b'");
}

TEST(JsonSchema, InvalidUtf8IsAnErrorNotAnException) {
  Json schema = {{"enum", Json::array({std::string("\xFF")})}};
  auto g = compile_json_schema(schema);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  nlohmann::json unordered = {{"const", std::string("\xC3")}};
  EXPECT_FALSE(compile_json_schema(unordered).ok());
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  auto g = std::make_shared<CompiledGrammar>(json_object_grammar());
  EXPECT_TRUE(accepts(g, R"({})"));
  EXPECT_TRUE(accepts(g, R"({"a":[1,{"b":"\u00e9"}],"c":-1.5e3})"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, R"("s")"));
  EXPECT_FALSE(accepts(g, R"({"a":01})"));
  auto v = std::make_shared<CompiledGrammar>(json_value_grammar());
  EXPECT_TRUE(accepts(v, "[]"));
  EXPECT_TRUE(accepts(v, "true"));
}

}  // namespace
}  // namespace deepinfer::grammar
