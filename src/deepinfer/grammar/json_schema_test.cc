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

namespace deepinfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const CompiledGrammar> compile(const std::string& schema,
                                               const JsonSchemaOptions& o = {}) {
  auto g = compile_json_schema_text(schema, o);
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

void expect_error_with(const std::string& schema, const JsonSchemaOptions& o, StatusCode code,
                       const std::string& needle) {
  auto g = compile_json_schema_text(schema, o);
  ASSERT_FALSE(g.ok()) << schema;
  EXPECT_EQ(g.status().code(), code) << g.status().to_string();
  EXPECT_NE(g.status().message().find(needle), std::string::npos)
      << g.status().message() << " lacks " << needle;
}

void expect_error(const std::string& schema, StatusCode code, const std::string& needle) {
  auto g = compile_json_schema_text(schema);
  ASSERT_FALSE(g.ok()) << schema;
  EXPECT_EQ(g.status().code(), code) << g.status().to_string();
  EXPECT_NE(g.status().message().find(needle), std::string::npos)
      << g.status().message() << " lacks " << needle;
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

// Issue 21. Expectations come from the specification (JSON Schema 2020-12 validation, RFC 1123,
// RFC 3339 appendix A, RFC 3986, RFC 6901): every "good" document is valid and every "bad" one
// invalid under the schema; "valid but not written" cases are marked as such (sound, not
// complete).
void check_cases(const std::vector<Case>& cases, const JsonSchemaOptions& o = {}) {
  for (const Case& c : cases) {
    auto g = compile(c.schema, o);
    if (!g) continue;
    for (const std::string& t : c.good)
      EXPECT_TRUE(accepts(g, t)) << c.schema << " should take " << t;
    for (const std::string& t : c.bad) EXPECT_FALSE(accepts(g, t)) << c.schema << " took " << t;
  }
}

TEST(JsonSchemaCoverage, UniqueItemsStaysSound) {
  check_cases({
      // A finite item set: distinct items in the set's order.
      {R"({"type":"array","items":{"enum":["a","b","c"]},"uniqueItems":true})",
       {"[]", R"(["a"])", R"(["a","c"])", R"(["a", "b", "c"])"},
       {R"(["a","a"])", R"(["a","b","c","a"])", R"(["d"])",
        R"(["b","a"])"}},  // the last is valid but not written (one order only)
      // 1 and 1.0 are the same JSON value, so at most one of them.
      {R"({"type":"array","items":{"enum":[1,1.0,2]},"uniqueItems":true})",
       {"[1]", "[1,2]"},
       {"[1,1.0]", "[1,1]", "[2,2]"}},
      {R"({"type":"array","items":{"type":"boolean"},"uniqueItems":true,"minItems":2})",
       {"[true,false]"},
       {"[true,true]", "[true]", "[]", "[true,false,true]"}},
      {R"({"$defs":{"c":{"enum":["x","y"]}},"type":"array","items":{"$ref":"#/$defs/c"},
          "uniqueItems":true,"maxItems":1})",
       {"[]", R"(["y"])"},
       {R"(["x","y"])"}},
      // Any other items: at most one.
      {R"({"type":"array","items":{"type":"string"},"uniqueItems":true})",
       {"[]", R"(["x"])"},
       {R"(["x","x"])", R"(["x","y"])"}},  // the last is valid but not written
  });
  expect_error(R"({"type":"array","items":{"enum":["a"]},"uniqueItems":true,"minItems":2})",
               StatusCode::kInvalidArgument, "accepts no value");
}

TEST(JsonSchemaCoverage, MinAndMaxPropertiesCountMembers) {
  check_cases({
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
          "c":{"type":"integer"}},"minProperties":2})",
       {R"({"a":1,"b":2})", R"({"a":1,"c":3})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
       {"{}", R"({"a":1})", R"({"c":3})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
          "required":["a"],"maxProperties":1})",
       {R"({"a":1})"},
       {"{}", R"({"a":1,"b":2})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,
          "maxProperties":2})",
       {R"({"x":1})", R"({"x":1,"y":2})"},
       {"{}", R"({"x":1,"y":2,"z":3})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},
          "additionalProperties":{"type":"string"},"minProperties":2,"maxProperties":3})",
       {R"({"a":1,"x":"s"})", R"({"x":"s","y":"t"})", R"({"a":1,"x":"s","y":"t"})"},
       {"{}", R"({"a":1})", R"({"x":"s"})", R"({"a":1,"x":"s","y":"t","z":"u"})"}},
  });
  expect_error(R"({"type":"object","properties":{"a":{}},"required":["a"],"maxProperties":0})",
               StatusCode::kInvalidArgument, "accepts no value");
  expect_error(R"({"type":"object","minProperties":100})", StatusCode::kUnimplemented,
               "'minProperties'");
}

TEST(JsonSchemaCoverage, OverlappingOneOfOnlyWhereOutputIsExclusive) {
  const std::string two_objects =
      R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
                   {"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}]})";
  // The schemas overlap ({"a":"x","b":"y"} matches both, so oneOf rejects it), but in strict mode
  // each branch writes only its own members, so nothing written matches the other branch.
  check_cases({{two_objects,
                {R"({"a":"x"})", R"({"b":"y"})"},
                {R"({"a":"x","b":"y"})", R"({"b":"y","a":"x"})", "{}"}}});
  // Without strict mode the branches are open; each is narrowed to never write the other's
  // required member, so again nothing written matches both.
  JsonSchemaOptions lax;
  lax.strict = false;
  check_cases({{two_objects,
                {R"({"a":"x"})", R"({"b":"y","c":1})"},
                {R"({"a":"x","b":"y"})", R"({"c":1,"a":"x","b":"y"})", "{}"}}},
              lax);
  expect_error_with(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})", lax,
                    StatusCode::kUnimplemented, "'oneOf'");
  check_cases({
      // The same narrowing where siblings list both members.
      {R"({"type":"object","properties":{"src":{"type":"string"},"handle":{"type":"string"}},
          "oneOf":[{"required":["src"]},{"required":["handle"]}]})",
       {R"({"src":"x"})", R"({"handle":"y"})"},
       {R"({"src":"x","handle":"y"})", "{}"}},
  });
  check_cases({
      // Each value of the enum fails the other branch's pattern.
      {R"({"oneOf":[{"enum":["a","b"]},{"type":"string","pattern":"^c[a-z]*$"}]})",
       {R"("a")", R"("cx")"},
       {R"("d")", R"("ac")"}},
      // A plain string branch is narrowed to never write the other branch's strings.
      // ("linux" matches both branches, so oneOf rejects it; the enum branch is left out.)
      {R"({"oneOf":[{"enum":["linux","osx"]},{"type":"string"}]})",
       {R"("win")", R"("")", R"("linu")"},
       {R"("linux")", R"("osx")", "1"}},
      // Every object written for the open second branch fails the first (it never writes "f");
      // the first branch's objects all match the second too, so oneOf rejects them: left out.
      {R"({"oneOf":[{"type":"object","properties":{"f":{"type":"string"}},"required":["f"]},
                    {"type":"object","properties":{"g":{"type":"integer"}},
                     "additionalProperties":true}]})",
       {"{}", R"({"g":1})"},
       {R"({"f":"x"})", R"({"f":"x","g":1})"}},
      // An optional discriminator is made required in each branch.
      {R"({"$defs":{"x":{"type":"object","properties":{"kind":{"const":"x"},"v":{"type":"integer"}}},
                    "y":{"type":"object","properties":{"kind":{"const":"y"},"v":{"type":"string"}}}},
          "oneOf":[{"$ref":"#/$defs/x"},{"$ref":"#/$defs/y"}]})",
       {R"({"kind":"x","v":1})", R"({"kind":"y"})"},
       {"{}", R"({"kind":"x","v":"s"})",
        R"({"v":1})"}},  // the last is valid (only x matches) but not written
      // ... also where a branch is itself a union whose members each pin it.
      // (a1 and a2 admit every non-object too; the branch is narrowed to objects.)
      {R"({"$defs":{"a1":{"properties":{"kind":{"const":"a1"}}},
                    "a2":{"properties":{"kind":{"const":"a2"}}},
                    "b":{"type":"object","properties":{"kind":{"const":"b"},"x":{"type":"integer"}}}},
          "oneOf":[{"anyOf":[{"$ref":"#/$defs/a1"},{"$ref":"#/$defs/a2"}]},{"$ref":"#/$defs/b"}]})",
       {R"({"kind":"a1"})", R"({"kind":"a2"})", R"({"kind":"b","x":1})"},
       {"{}", R"({"kind":"c"})", R"({"x":1})", "1", R"("s")"}},
      // Anchored patterns whose literal prefixes diverge.
      {R"({"oneOf":[{"type":"string","pattern":"^build; ?args:"},
                    {"type":"string","pattern":"^build\\[uv\\]; ?args:"}]})",
       {R"("build;args:")", R"("build[uv]; args:")"},
       {R"("build")"}},
      // A required discriminator whose schemas are disjoint (type, then const).
      {R"({"oneOf":[{"type":"object","properties":{"v":{"type":"integer"}},"required":["v"],
                     "additionalProperties":true},
                    {"type":"object","properties":{"v":{"type":"string"}},"required":["v"],
                     "additionalProperties":true}]})",
       {R"({"v":1})", R"({"v":"s"})", R"({"v":1,"w":2})"},
       {R"({"v":true})", "{}"}},
  });
}

TEST(JsonSchemaCoverage, ConditionalsAreSoundStandIns) {
  check_cases({
      // if/then without else: `then` always holds (a value valid under then passes either way).
      {R"({"type":"object","properties":{"k":{"enum":["a","b"]},"x":{"type":"integer"}},
          "required":["k"],"if":{"properties":{"k":{"const":"a"}}},"then":{"required":["x"]}})",
       {R"({"k":"a","x":1})", R"({"k":"b","x":1})"},
       {R"({"k":"a"})", R"({"k":"b"})"}},  // the last is valid but not written
      // (if and then) or (then and else).
      {R"({"if":{"type":"string"},"then":{"minLength":2},"else":{"type":"integer"}})",
       {R"("ab")", "3"},
       {R"("a")", "true", "null", "1.5"}},
      // then/else without if impose nothing (the spec).
      {R"({"type":"integer","then":{"minimum":5},"else":{"maximum":0}})", {"1", "-4"}, {"1.5"}},
  });
}

TEST(JsonSchemaCoverage, NotOfSimpleForms) {
  check_cases({
      {R"({"type":["string","null"],"not":{"type":"null"}})", {R"("x")"}, {"null", "1"}},
      {R"({"type":"object","properties":{"a":{},"b":{}},"not":{"required":["a"]}})",
       {"{}", R"({"b":1})"},
       {R"({"a":1})", R"({"a":1,"b":2})"}},
      {R"({"properties":{"a":{},"b":{}},"not":{"anyOf":[{"required":["a"]},{"required":["b"]}]}})",
       {"{}"},
       {R"({"a":1})", R"({"b":1})", "1", R"("s")"}},  // not-required rejects every non-object
      {R"({"enum":["x","y","z"],"not":{"const":"y"}})", {R"("x")", R"("z")"}, {R"("y")"}},
      // Parts of the negated schema that every value meets change nothing.
      {R"({"type":"object","properties":{"a":{},"b":{}},
          "not":{"type":"object","properties":{"a":{}},"additionalProperties":true,
                 "required":["a"]}})",
       {"{}", R"({"b":1})"},
       {R"({"a":1})"}},
      // Strings struck from a plain string, also per anyOf branch.
      {R"({"type":"string","not":{"enum":["jsonc","toml"]}})",
       {R"("json")", R"("")"},
       {R"("jsonc")", R"("toml")", "1"}},
      {R"({"anyOf":[{"enum":["json","yaml","toml"]},{"type":"string"}],"not":{"enum":["toml"]}})",
       {R"("json")", R"("x")"},
       {R"("toml")"}},
      // not (required and more): the value lacks a required name (not written: values that
      // fail only the rest, such as {"env":{}}).
      {R"({"type":"object","properties":{"env":{},"x":{}},
          "not":{"properties":{"env":{"type":"object","minProperties":1}},"required":["env"]}})",
       {"{}", R"({"x":1})"},
       {R"({"env":{"a":1}})", R"({"env":{}})"}},
      // Strings struck beside a pattern or a length: excluded as the pattern ^s$.
      {R"({"type":"string","pattern":"^[a-zA-Z_][a-zA-Z0-9_]*$","not":{"const":"Default"}})",
       {R"("Defaults")", R"("default")", R"("x")"},
       {R"("Default")", R"("1a")"}},
      {R"({"type":"string","maxLength":4,"not":{"enum":["a.b","*"]}})",
       {R"("a-b")", R"("ab")", R"("")", R"("**")"},
       {R"("a.b")", R"("*")", R"("abcde")"}},
  });
  expect_error(R"({"type":"string","not":{"minLength":3}})", StatusCode::kUnimplemented, "'not'");
  // An anyOf branch with an unsupported keyword drops out while a substantial one compiles ...
  check_cases({{R"({"anyOf":[{"type":"string","not":{"minLength":3}},{"type":"integer"}]})",
                {"1"},
                {R"("b")"}}});  // valid, but its branch is not compiled
  // ... but not when only listed values or null would be left.
  expect_error(R"({"anyOf":[{"type":"string","not":{"minLength":3}},{"type":"null"}]})",
               StatusCode::kUnimplemented, "'not'");
  expect_error(R"({"type":"integer","not":{}})", StatusCode::kInvalidArgument, "accepts no value");
}

// unevaluatedProperties: S holds where additionalProperties: S does beside the properties its
// scope (own keywords, allOf, $ref) lists; a part with additionalProperties evaluates every
// member. In an allOf part it sees only that part's names.
TEST(JsonSchemaCoverage, UnevaluatedPropertiesAsAdditionalOverItsScope) {
  check_cases({
      {R"({"$schema":"https://json-schema.org/draft/2020-12/schema",
          "$defs":{"base":{"properties":{"name":{"type":"string"}},"required":["name"]}},
          "allOf":[{"$ref":"#/$defs/base"}],"properties":{"kind":{"const":"x"}},
          "unevaluatedProperties":false})",
       {R"({"name":"a"})", R"({"kind":"x","name":"a"})"},  // written in merged order
       {R"({"name":"a","other":1})", R"({"kind":"x"})"}},
      {R"({"type":"object","properties":{"a":{}},"unevaluatedProperties":{"type":"integer"}})",
       {R"({"a":"s","b":1})", "{}"},
       {R"({"b":"s"})"}},
      {R"({"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"},
          "unevaluatedProperties":false})",
       {R"({"b":"x"})"},
       {R"({"b":1})"}},
      {R"({"type":"object","allOf":[{"properties":{"a":{}},"unevaluatedProperties":false}],
          "properties":{"b":{}}})",
       {R"({"a":1})", "{}"},
       {R"({"b":1})"}},  // b is unevaluated in the part: invalid
  });
}

// oneOf branches behind $refs whose types differ are exclusive.
TEST(JsonSchemaCoverage, OneOfOfReferencesWithDisjointTypes) {
  check_cases({{R"({"$defs":{"t":{"oneOf":[{"enum":["on","off"]},{"type":"boolean"}]},
                   "r":{"type":"object","properties":{"level":{"enum":["error"]}}}},
                   "type":"object","properties":{"x":{"oneOf":[{"$ref":"#/$defs/t"},
                   {"$ref":"#/$defs/r","properties":{"extra":{"type":"integer"}}}]}},
                   "required":["x"]})",
                {R"({"x":"on"})", R"({"x":true})", R"({"x":{"level":"error"}})"},
                {R"({"x":1})", R"({"x":"maybe"})"}}});
}

// oneOf branches that both accept {}: a branch listing a member the other forbids (closed,
// not listed, no pattern of its patternProperties finds it) is narrowed to require it. A
// string branch with not: {enum} excludes exactly those values of an enum branch.
TEST(JsonSchemaCoverage, OneOfNarrowedByAMemberTheOtherForbids) {
  check_cases({
      {R"({"oneOf":[{"enum":["pinned","latest"]},{"type":"string","not":{"enum":["pinned","latest"]}},
          {"type":"object","additionalProperties":false,"properties":{"file":{"type":"string"}}},
          {"type":"object","additionalProperties":false,
           "properties":{"packages":{"type":"array","items":{"type":"string"}}}}]})",
       {R"("pinned")", R"("x")", R"({"file":"a"})", R"({"packages":[]})"},
       {"{}", R"({"file":"a","packages":[]})", "1"}},  // {} matches both object branches
      {R"({"oneOf":[{"type":"object","additionalProperties":false,
                     "patternProperties":{"^schema ":{"type":"object"}}},
                    {"type":"object","additionalProperties":false,
                     "patternProperties":{"^table ":{"type":"object"}},
                     "properties":{"owner":{"type":"string"}}}]})",
       {R"({"owner":"me"})"},
       {"{}", R"({"schema x":{}})"}},  // the first branch cannot be narrowed: not written
  });
  // A pattern of the other branch finds the member: it is not forbidden there.
  expect_error(R"({"oneOf":[{"type":"object","additionalProperties":false,
                             "patternProperties":{"^own":{"type":"string"}}},
                            {"type":"object","additionalProperties":false,
                             "properties":{"owner":{"type":"string"}}}]})",
               StatusCode::kUnimplemented, "may overlap");
}

// A branch's output fails a union when it fails each of its branches; a pure union branch
// excludes another when each of its own branches does.
TEST(JsonSchemaCoverage, OneOfOfUnionsOfClosedObjects) {
  check_cases({{R"({"definitions":{
      "ent":{"oneOf":[{"type":"object","properties":{"Table":{"type":"string"}},
                       "required":["Table"],"additionalProperties":false},
                      {"type":"object","properties":{"Entity":{"type":"string"}},
                       "required":["Entity"],"additionalProperties":false}]},
      "prop":{"oneOf":[{"type":"object","properties":{"Table":{"type":"string"},
                        "Column":{"type":"string"}},"required":["Table","Column"],
                        "additionalProperties":false},
                       {"type":"object","properties":{"Entity":{"type":"string"},
                        "Property":{"type":"string"}},"required":["Entity","Property"],
                        "additionalProperties":false}]}},
      "oneOf":[{"$ref":"#/definitions/ent"},{"$ref":"#/definitions/prop"}]})",
                {R"({"Table":"t"})", R"({"Entity":"e"})", R"({"Table":"t","Column":"c"})",
                 R"({"Entity":"e","Property":"p"})"},
                {R"({"Table":"t","Entity":"e"})", "{}", R"({"Column":"c"})"}}});
}

// Pattern checks by std::regex are trusted only where Python's re (the validators') reads the
// pattern and the string alike; expectations are Python's.
TEST(JsonSchemaCoverage, PatternChecksOnlyWhereStdRegexAgreesWithPython) {
  using json_detail::ascii_pattern_finds;
  EXPECT_EQ(ascii_pattern_finds("^a.c$", "abc"), std::optional<bool>(true));
  EXPECT_EQ(ascii_pattern_finds("^a.c$", "abd"), std::optional<bool>(false));
  EXPECT_EQ(ascii_pattern_finds("(?:ab)+$", "xabab"), std::optional<bool>(true));
  EXPECT_EQ(ascii_pattern_finds("^(?!x)", "xy"), std::optional<bool>(false));
  // Python's \Z ends the string, (?i) ignores case, [[:alpha:]] is no class there: unsure.
  EXPECT_EQ(ascii_pattern_finds("^own\\Z", "own"), std::nullopt);
  EXPECT_EQ(ascii_pattern_finds("(?i)abc", "ABC"), std::nullopt);
  EXPECT_EQ(ascii_pattern_finds("[[:alpha:]]", "a"), std::nullopt);
  EXPECT_EQ(ascii_pattern_finds("^x", "\u00e9"), std::nullopt);  // not printable ASCII
}

TEST(JsonSchemaCoverage, MoreFormats) {
  check_cases({
      {R"({"type":"string","format":"hostname"})",
       {R"("example.com")", R"("a-b.c")", R"("localhost")", R"("x1.y2.z3.w4")"},
       {R"("-a.com")", R"("a..b")", R"("a_b")", R"("")", R"("a-.b")",
        R"("a.b.c.d.e")"}},  // the last is valid but not written (at most 4 labels)
      {R"({"type":"string","format":"duration"})",
       {R"("P1D")", R"("PT1H30M")", R"("P2W")", R"("P1Y2M3DT4H5M6S")"},
       {R"("P")", R"("PT")", R"("P1H")", R"("1D")", R"("P1DT")"}},
      {R"({"type":"string","format":"json-pointer"})",
       {R"("")", R"("/a~0b/c")", R"("/")"},
       {R"("a")", R"("/~2")"}},
      {R"({"type":"string","format":"regex"})", {R"("^ab.*$")", R"("a\\d+")"}, {R"("(")"}},
      {R"({"type":"string","format":"uri-reference"})",
       {R"("../x?y#z")", R"("http://a/b")", R"("")", R"("a/b")"},
       {R"("a b")", R"("a:b:c d")"}},
      // A format no draft defines is an annotation.
      {R"({"type":"string","format":"my-own-format"})", {R"("anything")", R"("")"}, {"1"}},
  });
}

TEST(JsonSchemaCoverage, LengthBoundsThePatternAlreadyMeets) {
  check_cases({
      {R"({"type":"string","pattern":"^[a-z]{3}$","maxLength":5,"minLength":3})",
       {R"("abc")"},
       {R"("abcd")", R"("ab")"}},
      {R"({"type":"string","format":"date","maxLength":10})",
       {R"("2024-02-29")"},
       {R"("2023-02-29")"}},
  });
  // Otherwise, given a maxLength, unbounded repetitions are capped so that every string fits.
  check_cases({
      {R"({"type":"string","pattern":"^[a-z0-9-]+$","minLength":1,"maxLength":5})",
       {R"("a")", R"("ab-12")"},
       {R"("")", R"("abcdef")", R"("A")"}},
      {R"({"type":"string","minLength":5,"maxLength":14,
          "pattern":"^(?:0|[1-9]\\d*)\\.(?:0|[1-9]\\d*)\\.(?:0|[1-9]\\d*)$"})",
       {R"("1.2.3")", R"("10.20.300")", R"("0.0.0")"},
       {R"("1.2")", R"("1.2.33333333333")", R"("01.2.3")"}},
      {R"({"type":"string","format":"email","maxLength":254})",
       {R"("a@b.co")", R"("x.y@mail.example.org")"},
       {R"("a@b")", "\"" + std::string(250, 'a') + "@b.co\""}},
  });
  // Failing both, the length bound is intersected with the pattern (json_schema_strings_test.cc).
}

TEST(JsonSchemaCoverage, PropertyNamesAndPatternNamedMembers) {
  check_cases({
      // Names come from the pattern (full match); listed names that fail it are not written.
      {R"({"type":"object","additionalProperties":{"type":"integer"},
          "propertyNames":{"pattern":"^[a-z]+$"}})",
       {"{}", R"({"ab":1})", R"({"ab":1,"c":2})"},
       {R"({"A":1})", R"({"a b":1})", R"({"":1})"}},
      {R"({"type":"object","properties":{"ok":{"type":"integer"},"NO":{"type":"integer"}},
          "propertyNames":{"maxLength":2,"pattern":"^[a-z]"}})",
       {"{}", R"({"ok":1})"},
       {R"({"NO":1})", R"({"zz":1})"}},  // no additional members (strict mode)
      // additionalProperties false still allows pattern-named members.
      {R"({"type":"object","patternProperties":{"^x-[a-z]+$":{"type":"string"}},
          "additionalProperties":false,"minProperties":1,"maxProperties":2})",
       {R"({"x-a":"s"})", R"({"x-a":"s","x-b":"t"})"},
       {"{}", R"({"y":"s"})", R"({"x-a":1})", R"({"x-a":"s","x-b":"t","x-c":"u"})"}},
  });
  expect_error(R"({"type":"object","properties":{"AB":{}},"required":["AB"],
                  "propertyNames":{"pattern":"^[a-z]+$"}})",
               StatusCode::kInvalidArgument, "accepts no value");
}

// A keyword of a later draft means nothing under the schema's own draft (draft 4 has no
// `const`, draft 7 no `dependentRequired`), as its validators say.
TEST(JsonSchemaCoverage, LaterDraftsKeywordsAreNotKeywords) {
  check_cases({
      {R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"string","const":"a"})",
       {R"("a")", R"("b")"},
       {"1"}},
      {R"({"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
          "properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
          "dependentRequired":{"a":["b"]}})",
       {R"({"a":1})", R"({"a":1,"b":2})"},
       {R"({"a":"x"})"}},
      // $defs in a draft-07 schema is no keyword, but a JSON pointer into it still resolves.
      {R"({"$schema":"http://json-schema.org/draft-07/schema#","$defs":{"n":{"type":"integer"}},
          "$ref":"#/$defs/n"})",
       {"1"},
       {R"("x")"}},
  });
  // Under draft 4 every branch accepts every value, so the oneOf accepts none.
  expect_error(R"({"$schema":"http://json-schema.org/draft-04/schema#",
                  "oneOf":[{"const":"a"},{"const":"b"}]})",
               StatusCode::kUnimplemented, "'oneOf'");
}

TEST(JsonSchemaCoverage, AdditionalPropertiesAcrossAllOfParts) {
  check_cases({
      // "b" is an additional member for the first part, which forbids those.
      {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},
                     "additionalProperties":false},
                    {"properties":{"b":{"type":"string"}}}]})",
       {"{}", R"({"a":1})"},
       {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"c":1})"}},
      // ... or requires them to be integers.
      {R"({"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"integer"}},
                    {"properties":{"b":{"type":"number"}},"additionalProperties":{"minimum":0}}]})",
       {R"({"b":1})", R"({"a":"s","c":2})"},
       {R"({"b":1.5})", R"({"c":"x"})", R"({"c":-1})"}},
  });
  expect_error(R"({"allOf":[{"type":"object","additionalProperties":false},
                            {"properties":{"b":{}},"required":["b"]}]})",
               StatusCode::kUnimplemented, "'additionalProperties'");
}

TEST(JsonSchemaCoverage, RefSiblingsEnumSiblingsAndFragmentIds) {
  check_cases({
      // A root $id beside a union, not or a conditional is where it belongs.
      {R"({"$id":"https://x.org/s.json","oneOf":[{"type":"string"},{"type":"integer"}]})",
       {R"("s")", "1"},
       {"true"}},
      {R"({"$id":"https://x.org/s.json","type":"object","properties":{"a":{}},
          "not":{"required":["a"]}})",
       {"{}"},
       {R"({"a":1})"}},
      // Beside $ref, other keywords apply too (2020-12).
      {R"({"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":2})",
       {R"("ab")"},
       {R"("abc")", "1"}},
      // A union branch {$ref: "#"} merged with its siblings recurs: one rule per merged schema.
      {R"({"type":"object","properties":{"kids":{"type":"array",
          "items":{"type":["object","null"],"anyOf":[{"type":"null"},{"$ref":"#"}]}}}})",
       {R"({"kids":[null,{"kids":[]}]})", R"({"kids":[{"kids":[{}]}]})"},
       {R"({"kids":[1]})", R"({"kids":[{"kids":[true]}]})"}},
      // A pointer into a member that is no keyword.
      {R"({"definitions":{"a":{"full":{"type":"integer"}}},"$ref":"#/definitions/a/full"})",
       {"1"},
       {R"("x")"}},
      // Keywords beside enum keep only the values that satisfy them.
      {R"({"enum":["a","bb","ccc",7],"maxLength":2,"minimum":8})",
       {R"("a")", R"("bb")"},
       {R"("ccc")", "7"}},
      {R"({"type":"object","properties":{"a":{"$id":"#/properties/a","type":"integer"}}})",
       {R"({"a":1})"},
       {R"({"a":"x"})"}},
  });
  expect_error(R"({"type":"object","properties":{"a":{"$id":"https://x.org/a","type":"integer"}}})",
               StatusCode::kUnimplemented, "'$id'");
}

}  // namespace
}  // namespace deepinfer::grammar
