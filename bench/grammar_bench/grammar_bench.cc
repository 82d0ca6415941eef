// Structured-output speed with the real DeepSeek tokenizer, one thread: per-tokenizer
// preprocessing, compile time per grammar, and per-token mask time over seeded random walks on a
// mix of JSON schemas (plus json_object and a few regexes / EBNF grammars, reported apart).
//
// Usage: grammar_bench [--tokenizer DIR] [--walks N] [--max-tokens N] [--only ITEM]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/grammar_matcher.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/regex_parser.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using deepinfer::grammar::CompiledGrammar;
using deepinfer::grammar::Grammar;
using deepinfer::grammar::GrammarMatcher;
using deepinfer::grammar::MaskCache;
using deepinfer::grammar::TokenizerInfo;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

struct Item {
  const char* kind;  // "json_schema" | "json_object" | "regex" | "ebnf"
  const char* name;
  const char* text;
};

// Shapes seen in structured-output requests: flat records, enums, nested objects, arrays of
// objects, formats and patterns, numeric bounds, unions, recursion through $ref.
const Item kItems[] = {
    {"json_schema", "person",
     R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
        "email":{"type":"string"},"active":{"type":"boolean"}},
        "required":["name","age","email","active"]})"},
    {"json_schema", "enum_and_const",
     R"({"type":"object","properties":{"status":{"enum":["ok","error","pending"]},
        "version":{"const":2},"note":{"type":"string","maxLength":40}},
        "required":["status","version"]})"},
    {"json_schema", "nested_address",
     R"({"type":"object","properties":{"id":{"type":"integer","minimum":0},
        "address":{"type":"object","properties":{"street":{"type":"string"},
        "city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
        "required":["street","city","zip"]}},"required":["id","address"]})"},
    {"json_schema", "array_of_items",
     R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"object",
        "properties":{"sku":{"type":"string"},"qty":{"type":"integer"},
        "price":{"type":"number"}},"required":["sku","qty","price"]},"maxItems":8}},
        "required":["items"]})"},
    {"json_schema", "tool_call",
     R"({"type":"object","properties":{"name":{"type":"string","enum":["get_weather",
        "search","calculator"]},"arguments":{"type":"object","properties":{
        "query":{"type":"string"},"unit":{"enum":["c","f"]},"limit":{"type":"integer"}},
        "required":["query"]}},"required":["name","arguments"]})"},
    {"json_schema", "union_anyof",
     R"({"type":"object","properties":{"value":{"anyOf":[{"type":"string"},
        {"type":"number"},{"type":"null"}]},"tags":{"type":"array",
        "items":{"type":"string"}}},"required":["value","tags"]})"},
    {"json_schema", "recursive_tree",
     R"({"$defs":{"node":{"type":"object","properties":{"label":{"type":"string"},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
        "required":["label","children"]}},"$ref":"#/$defs/node"})"},
    {"json_schema", "formats",
     R"({"type":"object","properties":{"date":{"type":"string","format":"date"},
        "uuid":{"type":"string","format":"uuid"},"score":{"type":"number"},
        "flags":{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":4}},
        "required":["date","uuid","score","flags"]})"},
    {"json_object", "json_object", ""},
    {"ebnf", "json_ebnf", R"(root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n\r]{0,4}
)"},
    {"ebnf", "person_ebnf",
     R"(root ::= "{\"name\": " str ", \"age\": " int ", \"active\": " ("true" | "false") "}"
str ::= "\"" [^"\\\x00-\x1F]* "\""
int ::= "-"? ("0" | [1-9] [0-9]{0,15})
)"},
    {"regex", "phone", R"(\(\d{3}\) \d{3}-\d{4})"},
    {"regex", "words", R"([A-Za-z]+( [A-Za-z]+){0,8}\.)"},
    {"ebnf", "arith",
     "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\""},
};

deepinfer::StatusOr<Grammar> build(const Item& it) {
  std::string kind = it.kind;
  if (kind == "json_schema") return deepinfer::grammar::compile_json_schema_text(it.text);
  if (kind == "json_object") return deepinfer::grammar::json_object_grammar();
  if (kind == "regex") return deepinfer::grammar::parse_regex(it.text);
  return deepinfer::grammar::parse_ebnf(it.text);
}

struct WalkStats {
  std::vector<double> times;  // us per fill_next_token_bitmask
  int64_t hits = 0, lookups = 0;
  bool bug = false;
};

// Seeded walks that pick uniformly among the allowed tokens until the matcher terminates or
// max_tokens masks were taken.
WalkStats run_walks(const std::shared_ptr<const CompiledGrammar>& g,
                    const std::shared_ptr<const TokenizerInfo>& info, int walks, int max_tokens,
                    uint64_t seed, const std::shared_ptr<MaskCache>& cache,
                    std::vector<uint32_t>* mask) {
  WalkStats st;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g, info, cache);
    const int64_t h0 = m.cache().hits, m0 = m.cache().misses;
    for (int step = 0; step < max_tokens && !m.is_terminated(); ++step) {
      auto t0 = Clock::now();
      m.fill_next_token_bitmask(mask->data());
      st.times.push_back(us_since(t0));
      ids.clear();
      for (int32_t wi = 0; wi < info->mask_words(); ++wi) {
        for (uint32_t bits = (*mask)[wi]; bits; bits &= bits - 1) {
          ids.push_back(wi * 32 + __builtin_ctz(bits));
        }
      }
      if (ids.empty()) break;
      int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
      if (!m.accept_token(id)) {
        std::fprintf(stderr, "BUG: masked token %d rejected\n", id);
        st.bug = true;
        return st;
      }
    }
    st.hits += m.cache().hits - h0;
    st.lookups += m.cache().hits - h0 + m.cache().misses - m0;
  }
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_dir = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
  int walks = 8, max_tokens = 96;
  std::string only;  // --only NAME: one item (for profiling)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) tok_dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--walks")) walks = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-tokens")) max_tokens = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
  }
  auto tok = deepinfer::tokenizer::Tokenizer::from_file(tok_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  const int32_t eos = 1;  // <｜end▁of▁sentence｜>
  std::vector<double> prep;
  std::shared_ptr<const TokenizerInfo> info;
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    auto i = TokenizerInfo::from_tokenizer(**tok, {eos});
    prep.push_back(us_since(t0) / 1000);
    info = *i;
  }
  std::printf("tokenizer: %s, vocab %d\n", tok_dir.c_str(), info->vocab_size());
  std::printf("per-tokenizer preprocessing: %.1f ms (median of 3)\n\n", percentile(prep, 0.5));

  std::printf("%-16s %-12s %9s %7s %9s %9s %9s %6s %9s %9s\n", "", "", "compile", "cold:", "median",
              "p99", "max", "hit%", "warm:med", "warm:p99");
  std::printf("%-16s %-12s %9s %7s %9s %9s %9s %6s %9s %9s\n", "item", "kind", "ms", "masks", "us",
              "us", "us", "", "us", "us");
  std::vector<double> schema_masks, schema_compiles, other_masks, warm_masks;
  std::vector<uint32_t> mask(info->mask_words());
  for (const Item& it : kItems) {
    if (!only.empty() && only != it.name) continue;
    std::vector<double> compiles;
    std::shared_ptr<const CompiledGrammar> g;
    for (int r = 0; r < 5; ++r) {
      auto t0 = Clock::now();
      auto gr = build(it);
      if (!gr.ok()) {
        std::printf("%-16s %-12s error: %s\n", it.name, it.kind, gr.status().to_string().c_str());
        break;
      }
      g = std::make_shared<CompiledGrammar>(std::move(*gr), info->max_token_bytes());
      compiles.push_back(us_since(t0) / 1000);
    }
    if (!g) continue;
    // Cold: a fresh matcher and a fresh cache per walk, what one request sees alone.
    // Warm: the walks (other seeds) share one cache, as requests repeating a schema do.
    WalkStats cold = run_walks(g, info, walks, max_tokens, /*seed=*/7, nullptr, &mask);
    auto shared = std::make_shared<MaskCache>(info->mask_words(), 64 << 20);
    run_walks(g, info, walks, max_tokens, /*seed=*/8, shared, &mask);  // fills the cache
    WalkStats warm = run_walks(g, info, walks, max_tokens, /*seed=*/9, shared, &mask);
    if (cold.bug) return 1;
    const auto& times = cold.times;
    int64_t hits = cold.hits, lookups = cold.lookups;
    double cmed = percentile(compiles, 0.5);
    std::printf("%-16s %-12s %9.2f %7zu %9.1f %9.1f %9.1f %6.1f %9.1f %9.1f\n", it.name, it.kind,
                cmed, times.size(), percentile(times, 0.5), percentile(times, 0.99),
                percentile(times, 1.0), lookups ? 100.0 * hits / lookups : 0.0,
                percentile(warm.times, 0.5), percentile(warm.times, 0.99));
    const bool is_schema = std::string(it.kind) == "json_schema";
    auto& dst = is_schema ? schema_masks : other_masks;
    dst.insert(dst.end(), times.begin(), times.end());
    if (is_schema) warm_masks.insert(warm_masks.end(), warm.times.begin(), warm.times.end());
    if (std::string(it.kind) == "json_schema") schema_compiles.push_back(cmed);
  }
  auto ratio = [](double v, double goal) { return v / goal; };
  double med = percentile(schema_masks, 0.5), p99 = percentile(schema_masks, 0.99);
  double comp = percentile(schema_compiles, 0.5);
  double wmed = percentile(warm_masks, 0.5), wp99 = percentile(warm_masks, 0.99);
  std::printf("\nJSON schema mix, cold (%zu masks, %d walks/schema, <= %d tokens each):\n",
              schema_masks.size(), walks, max_tokens);
  std::printf("  mask median %8.1f us   goal <= 50 us    ratio %.2f\n", med, ratio(med, 50));
  std::printf("  mask p99    %8.1f us   goal <= 500 us   ratio %.2f\n", p99, ratio(p99, 500));
  std::printf("  mask mean   %8.1f us\n", mean(schema_masks));
  std::printf("JSON schema mix, warm (cache shared by a schema's requests; %zu masks):\n",
              warm_masks.size());
  std::printf("  mask median %8.1f us   goal <= 50 us    ratio %.2f\n", wmed, ratio(wmed, 50));
  std::printf("  mask p99    %8.1f us   goal <= 500 us   ratio %.2f\n", wp99, ratio(wp99, 500));
  std::printf("  mask mean   %8.1f us\n", mean(warm_masks));
  std::printf("  compile median %5.2f ms   goal <= 10 ms    ratio %.2f\n", comp, ratio(comp, 10));
  std::printf("other items (json_object, regex, ebnf): mask median %.1f us, p99 %.1f us\n",
              percentile(other_masks, 0.5), percentile(other_masks, 0.99));
  return 0;
}
