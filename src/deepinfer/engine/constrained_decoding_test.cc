// Constrained decoding through the engine on the tiny model: every output, greedy or sampled,
// is checked by an independent validator (PCRE2 for regexes and for the EBNF grammars'
// equivalent patterns, Debian's python3-jsonschema for JSON Schema, nlohmann::json for
// json_object).
#include <gtest/gtest.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/engine/constrained_decoding.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"

namespace deepinfer {
namespace {

using Kind = sample::StructuredOutput::Kind;

const std::string& model_dir() {
  static const std::string dir = v4::quantized_tiny_model_for_test("constrained_test_model", 5);
  return dir;
}

Engine& engine() {
  static std::unique_ptr<Engine> e = [] {
    EngineArgs a;
    a.model = model_dir();
    a.max_num_batched_tokens = 256;
    auto r = Engine::create(a);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return *e;
}

bool pcre_full_match(const std::string& pattern, const std::string& s) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &off, nullptr);
  EXPECT_NE(code, nullptr) << pattern;
  if (!code) return false;
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data, nullptr);
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return rc >= 0;
}

GenerateRequest request(Kind kind, const std::string& spec, float temperature, uint64_t seed) {
  GenerateRequest r;
  r.prompt = "The answer is";
  r.params.max_tokens = 96;
  r.params.temperature = temperature;
  r.params.seed = seed;
  r.params.so_args = sample::StructuredOutput{kind, spec};
  return r;
}

struct Case {
  Kind kind;
  std::string spec;
  std::string check;  // PCRE2 pattern the finished text must fully match
};

// Bounded languages, so that every generation ends within max_tokens whatever the model does.
std::vector<Case> cases() {
  return {
      {Kind::kRegex, R"([0-9]{3}-[0-9]{4})", R"([0-9]{3}-[0-9]{4})"},
      {Kind::kRegex, R"((yes|no|maybe)!?)", R"((yes|no|maybe)!?)"},
      {Kind::kRegex, R"([a-z]{1,8}@[a-z]{2,6}\.(com|org))", R"([a-z]{1,8}@[a-z]{2,6}\.(com|org))"},
      {Kind::kRegex, R"(\{"n": -?[1-9][0-9]{0,3}, "ok": (true|false)\})",
       R"(\{"n": -?[1-9][0-9]{0,3}, "ok": (true|false)\})"},
      {Kind::kRegex, "[\\x{4e00}-\\x{9fff}]{1,4}\\u3002", "[\\x{4e00}-\\x{9fff}]{1,4}\\x{3002}"},
      {Kind::kEbnf, "root ::= \"[\" num (\", \" num){0,3} \"]\"\nnum ::= [0-9]{1,3}",
       R"(\[[0-9]{1,3}(, [0-9]{1,3}){0,3}\])"},
      {Kind::kEbnf,
       "root ::= (\"Name\" | \"City\") \": \" word (\" \" word)?\nword ::= [A-Z] [a-z]{0,6}",
       R"((Name|City): [A-Z][a-z]{0,6}( [A-Z][a-z]{0,6})?)"},
  };
}

TEST(ConstrainedDecoding, GreedyAndSampledOutputsMatch) {
  int checked = 0;
  for (const Case& c : cases()) {
    for (float temperature : {0.0f, 1.0f}) {
      for (uint64_t seed : {1ull, 2ull}) {
        if (temperature == 0.0f && seed == 2) continue;  // greedy ignores the seed
        auto out = engine().generate(request(c.kind, c.spec, temperature, seed));
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const CompletionOutput& o = out->outputs[0];
        EXPECT_EQ(o.finish_reason, "stop") << c.spec << " -> '" << o.text << "'";
        EXPECT_TRUE(pcre_full_match(c.check, o.text))
            << c.spec << " (t=" << temperature << ", seed " << seed << ") -> '" << o.text << "'";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 3 * static_cast<int>(cases().size()));
}

TEST(ConstrainedDecoding, SeededSamplingIsReproducibleAndParallelSamplesAreValid) {
  const Case c = cases()[2];
  auto a = engine().generate(request(c.kind, c.spec, 1.0f, 9));
  auto b = engine().generate(request(c.kind, c.spec, 1.0f, 9));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->outputs[0].token_ids, b->outputs[0].token_ids);
  GenerateRequest r = request(c.kind, c.spec, 1.0f, 3);
  r.params.n = 3;
  auto many = engine().generate(r);
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->outputs.size(), 3u);
  for (const auto& o : many->outputs) {
    EXPECT_EQ(o.finish_reason, "stop");
    EXPECT_TRUE(pcre_full_match(c.check, o.text)) << o.text;
  }
}

// ignore_eos cannot make a sample run past the end of its grammar.
TEST(ConstrainedDecoding, GrammarEndStopsEvenWithIgnoreEos) {
  GenerateRequest r = request(Kind::kRegex, "(yes|no)", 0.0f, 1);
  r.params.ignore_eos = true;
  auto out = engine().generate(r);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->outputs[0].finish_reason, "stop");
  EXPECT_TRUE(out->outputs[0].text == "yes" || out->outputs[0].text == "no")
      << out->outputs[0].text;
}

// min_tokens masks eos while the grammar allows nothing else: the sample still ends at the
// grammar's end, greedy and sampled.
TEST(ConstrainedDecoding, GrammarEndWinsOverMinTokens) {
  for (float temperature : {0.0f, 1.0f}) {
    GenerateRequest r = request(Kind::kRegex, "(yes|no)", temperature, 4);
    r.params.min_tokens = 8;
    auto out = engine().generate(r);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->outputs[0].finish_reason, "stop");
    EXPECT_TRUE(out->outputs[0].text == "yes" || out->outputs[0].text == "no")
        << out->outputs[0].text;
  }
}

TEST(ConstrainedDecoding, GrammarErrorsAreRejectedAtSubmitNamingTheField) {
  auto expect_error = [](Kind kind, const std::string& spec, const std::string& fragment) {
    Status st = engine().submit(request(kind, spec, 0.0f, 1), nullptr);
    ASSERT_FALSE(st.ok()) << spec;
    EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
  };
  expect_error(Kind::kRegex, "(ab", "so_args.regex: ");
  expect_error(Kind::kRegex, "(?=a)b", "so_args.regex: ");
  expect_error(Kind::kEbnf, "root ::= missing", "so_args.ebnf: ebnf line 1");
  expect_error(Kind::kEbnf, "start ::= \"a\"", "so_args.ebnf: ");
  expect_error(Kind::kJsonSchema, "{\"type\": \"strnig\"}", "so_args.json_schema: ");
  expect_error(Kind::kJsonSchema, "{not json", "so_args.json_schema: ");
}

// Debian's python3-jsonschema, which shares nothing with our JSON Schema front end.
bool jsonschema_valid(const std::string& schema, const std::string& instance) {
  const std::string dir = model_dir() + "_json";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/schema.json") << schema;
  std::ofstream(dir + "/instance.json") << instance;
  const std::string cmd =
      "/usr/bin/python3 -c 'import json, sys, jsonschema; "
      "jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))' " +
      dir + "/schema.json " + dir + "/instance.json 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Bounded schemas (enums, bounded strings and integers, bounded arrays), so generation ends
// within max_tokens whatever the model does; whitespace gaps are bounded by the front end.
TEST(ConstrainedDecoding, JsonSchemaOutputsValidate) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
          "age":{"type":"integer","minimum":0,"maximum":150},"ok":{"type":"boolean"}},
          "required":["name","age","ok"],"additionalProperties":false})",
      R"({"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","b","c"]},
          "minItems":1,"maxItems":3},"kind":{"const":"t"}},"required":["tags","kind"],
          "additionalProperties":false})",
      R"({"anyOf":[{"type":"null"},{"type":"boolean"},{"enum":[1,2,3]}]})",
  };
  // The checker itself rejects what it should.
  EXPECT_FALSE(jsonschema_valid(schemas[0], R"({"name": 3, "age": 1, "ok": true})"));
  int checked = 0;
  for (const char* schema : schemas) {
    for (float temperature : {0.0f, 1.0f}) {
      for (uint64_t seed : {1ull, 2ull}) {
        if (temperature == 0.0f && seed == 2) continue;
        GenerateRequest r = request(Kind::kJsonSchema, schema, temperature, seed);
        r.params.max_tokens = 400;
        auto out = engine().generate(r);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const CompletionOutput& o = out->outputs[0];
        ASSERT_EQ(o.finish_reason, "stop") << schema << " -> '" << o.text << "'";
        EXPECT_TRUE(jsonschema_valid(schema, o.text)) << schema << " -> '" << o.text << "'";
        std::printf("json_schema (t=%.0f): %s\n", temperature,
                    nlohmann::json(o.text).dump().c_str());
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 9);
}

// json_object admits unbounded documents; a bias towards closing tokens (still subject to the
// mask) makes them end, and every finished one must parse as a JSON object.
TEST(ConstrainedDecoding, JsonObjectOutputsParse) {
  int finished = 0;
  for (float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed : {1ull, 2ull, 3ull}) {
      if (temperature == 0.0f && seed > 1) continue;
      GenerateRequest r = request(Kind::kJsonObject, "", temperature, seed);
      r.params.max_tokens = 400;
      // Closing tokens first, so documents end; a softer pull keeps sampled ones varied.
      const std::pair<const char*, float> bias[] = {
          {"\"}", 12.0f}, {"}", 10.0f}, {"\"", 9.0f}, {"]", 8.0f}, {"1", 6.0f}};
      for (const auto& [text, b] : bias) {
        auto ids = engine().tokenize(text);
        ASSERT_TRUE(ids.ok() && ids->size() == 1) << text;
        r.params.logit_bias[(*ids)[0]] = b;
      }
      auto out = engine().generate(r);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const CompletionOutput& o = out->outputs[0];
      ASSERT_EQ(o.finish_reason, "stop") << "'" << o.text << "'";
      std::printf("json_object (t=%.0f, seed %llu): %s\n", temperature,
                  static_cast<unsigned long long>(seed), nlohmann::json(o.text).dump().c_str());
      auto j = nlohmann::json::parse(o.text, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(j.is_discarded()) << "'" << o.text << "'";
      EXPECT_TRUE(j.is_object()) << "'" << o.text << "'";
      ++finished;
    }
  }
  EXPECT_EQ(finished, 4);
}

// Issue 14: the pathological regex is refused at submit with the compile limit named, as a
// json_schema pattern too, and the engine is not touched.
TEST(ConstrainedDecoding, PathologicalGrammarsAreRejectedAtSubmitNamingTheLimit) {
  const std::string bad = "(a{0,999}){0,999}a{30}";
  Status st = engine().submit(request(Kind::kRegex, bad, 0.0f, 1), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("so_args.regex: regex expands to more than 100000", 0), 0u)
      << st.message();
  EXPECT_NE(st.message().find("(limit 100000"), std::string::npos) << st.message();
  st = engine().submit(
      request(Kind::kJsonSchema, R"({"type": "string", "pattern": ")" + bad + R"("})", 0.0f, 1),
      nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("so_args.json_schema: json schema pattern at /: regex expands", 0),
            0u)
      << st.message();
  EXPECT_NE(st.message().find("(limit 100000"), std::string::npos) << st.message();
}

// x(a?){0,1000}b compiles (about 2000 elements) but every iteration may be empty, so once past
// the x an Earley set closes a thousand nullable completions that each scan the set: with the
// real vocabulary a mask then needs over 500M item operations (about a second), far over the
// 2^25 budget. The request ends with that error after its first token (both of its samples);
// a concurrent request on the same engine is unaffected, and nothing leaks.
TEST(ConstrainedDecoding, GrammarOverItsWorkBudgetEndsOnlyItsOwnRequest) {
  std::mutex m;
  std::condition_variable cv;
  std::map<std::string, RequestOutput> finals;
  auto on_output = [&](const RequestOutput& o) {
    if (!o.finished) return;
    std::lock_guard<std::mutex> lock(m);
    finals[o.request_id] = o;
    cv.notify_all();
  };
  const Case normal = cases()[0];
  GenerateRequest slow = request(Kind::kRegex, "x(a?){0,1000}b", 0.0f, 1);
  slow.request_id = "slow";
  slow.params.n = 2;
  GenerateRequest fine = request(normal.kind, normal.spec, 0.0f, 1);
  fine.request_id = "fine";
  ASSERT_TRUE(engine().submit(slow, on_output).ok());
  ASSERT_TRUE(engine().submit(fine, on_output).ok());
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return finals.size() == 2; });
  }
  const RequestOutput& s = finals["slow"];
  EXPECT_EQ(s.status.code(), StatusCode::kResourceExhausted) << s.status.to_string();
  EXPECT_EQ(s.status.message().rfind("so_args: the grammar's work budget ran out", 0), 0u)
      << s.status.message();
  EXPECT_NE(s.status.message().find("(limit 33554432 per token)"), std::string::npos)
      << s.status.message();
  ASSERT_EQ(s.outputs.size(), 2u);
  for (const CompletionOutput& o : s.outputs) {
    EXPECT_EQ(o.finish_reason, "abort");
    EXPECT_LE(o.token_ids.size(), 1u);  // only the token before the grammar's costly part
    EXPECT_TRUE(pcre_full_match("(xa*)?", o.text)) << o.text;  // a prefix of the language
  }
  const RequestOutput& f = finals["fine"];
  EXPECT_TRUE(f.status.ok()) << f.status.to_string();
  ASSERT_EQ(f.outputs.size(), 1u);
  EXPECT_EQ(f.outputs[0].finish_reason, "stop");
  EXPECT_TRUE(pcre_full_match(normal.check, f.outputs[0].text)) << f.outputs[0].text;
  // The engine goes on: the same grammar fails the same way, a normal request completes, and
  // every page is back in the pool.
  auto again = engine().generate(request(Kind::kRegex, "x(a?){0,1000}b", 1.0f, 7));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status.code(), StatusCode::kResourceExhausted);
  auto after = engine().generate(request(normal.kind, normal.spec, 1.0f, 3));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->status.ok());
  EXPECT_EQ(after->outputs[0].finish_reason, "stop");
  for (int i = 0; i < 2000 && engine().kv_free_pages() != engine().capacity().num_pages; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine().kv_free_pages(), engine().capacity().num_pages);
}

TEST(ConstrainedDecoding, GrammarCacheSharesCompiledGrammarsAndEvictsTheOldest) {
  GrammarCache cache(2);
  // A vocabulary whose longest token is 5 bytes: grammars are compiled to look that far ahead.
  auto info = grammar::TokenizerInfo::from_vocab({"a", "bb", "ccccc", "</s>"},
                                                 {true, true, true, false}, {3});
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  const grammar::TokenizerInfo& vocab = **info;
  sample::StructuredOutput a{Kind::kRegex, "a+"}, b{Kind::kRegex, "b+"},
      c{Kind::kEbnf, "root ::= \"c\""};
  auto a1 = cache.get(a, vocab), a2 = cache.get(a, vocab);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->grammar, a2->grammar);
  EXPECT_EQ(a1->masks, a2->masks);
  EXPECT_EQ(a1->grammar->max_lookahead(), 5u);
  EXPECT_EQ(a1->masks->mask_words(), vocab.mask_words());
  ASSERT_TRUE(cache.get(b, vocab).ok());
  ASSERT_TRUE(cache.get(c, vocab).ok());  // evicts a, the least recently used
  auto a3 = cache.get(a, vocab);
  ASSERT_TRUE(a3.ok());
  EXPECT_NE(a3->grammar, a1->grammar);
  EXPECT_FALSE(cache.get({Kind::kRegex, "("}, vocab).ok());
}

}  // namespace
}  // namespace deepinfer
