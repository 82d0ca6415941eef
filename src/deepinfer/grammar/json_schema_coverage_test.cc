// JSON Schema coverage (issue 21): the constructs real-world schemas use, each compiled only as
// a sound subset of its language. Expectations come from the specification, never from the code
// under test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/json_schema_merge.h"
#include "deepinfer/grammar/json_schema_test_util.h"

namespace deepinfer::grammar {
namespace {

using namespace testing;  // NOLINT: the shared test helpers

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
