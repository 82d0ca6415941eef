// Structured output over a real-world JSON Schema corpus (issue 21): how many schemas of
// bench/schema_corpus/corpus compile, why the others are refused (tallied by keyword), whether
// every finished random walk over the token mask validates against its schema (checked by
// bench/schema_corpus/validate_walks.py with python3-jsonschema), and the mask times, all with
// the real DeepSeek tokenizer on one thread.
//
// Usage: schema_corpus_bench [--corpus DIR] [--tokenizer DIR] [--walks N] [--max-tokens N]
//          [--seed N] [--item-budget-s S] [--workdir DIR] [--only SUBSTR] [--validate 0|1]
//          [--python PATH] [--list-errors 0|1] [--slow-log PATH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "deepinfer/grammar/grammar_matcher.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using deepinfer::grammar::CompiledGrammar;
using deepinfer::grammar::GrammarMatcher;
using deepinfer::grammar::MaskCache;
using deepinfer::grammar::TokenizerInfo;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// The refusal's first blocker, as "keyword" or "keyword: detail" (a format's name, what a
// keyword was combined with); other errors by their message with paths and numbers taken out.
std::string first_blocker(const deepinfer::Status& st) {
  const std::string& m = st.message();
  static const std::regex kw(R"(unsupported keyword '([^']*)' at \S+(?: \(([^)]*)\))?)");
  std::smatch sm;
  if (std::regex_search(m, sm, kw)) {
    std::string k = sm[1], why = sm[2];
    static const std::regex fmt(R"(format '([^']*)')");
    std::smatch fm;
    if (k == "format" && std::regex_search(why, fm, fmt)) return "format: " + fm[1].str();
    if (why.rfind("together with", 0) == 0 || why == "next to $ref" || why == "next to enum/const")
      return k + ": " + why;
    if (k == "oneOf" && why.find("may overlap") != std::string::npos) return "oneOf: may overlap";
    if (k == "patternProperties" || k == "uniqueItems" || k == "minProperties" ||
        k == "maxProperties" || k == "multipleOf" || k == "$ref" || k == "dependencies")
      return why.empty() ? k : k + ": " + std::regex_replace(why, std::regex("'[^']*'"), "'..'");
    return k;
  }
  std::string s = std::regex_replace(m, std::regex(R"( at /\S*)"), "");
  s = std::regex_replace(s, std::regex(R"(offset \d+)"), "offset N");
  s = std::regex_replace(s, std::regex(R"('[^']*')"), "'..'");
  if (s.size() > 90) s = s.substr(0, 90);
  return s;
}

// Every unsupported keyword the message names (each once).
std::set<std::string> named_keywords(const deepinfer::Status& st) {
  std::set<std::string> out;
  static const std::regex kw(R"('([^']*)' at /)");
  const std::string& m = st.message();
  for (auto it = std::sregex_iterator(m.begin(), m.end(), kw); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

struct Args {
  std::string corpus = std::string(DEEPINFER_SOURCE_DIR) + "/bench/schema_corpus/corpus";
  std::string tokenizer = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
  std::string workdir = "schema_corpus_run";
  std::string only;
  std::string python = "/usr/bin/python3";
  int walks = 4, max_tokens = 1024;
  uint64_t seed = 1;
  double item_budget_s = 20;
  bool validate = true, list_errors = false;
  std::string slow_log;  // every mask over 100 us: file, walk, step, the output's tail
};

struct Walk {
  std::string status;  // done | cap | work_budget | time_budget | dead | refused
  std::string out;
};

// A seeded walk over the mask until the stop token. Uniform choices alone rarely finish a real
// schema (they open strings and arrays far more often than they close them), so half of the
// choices prefer the stop token, then tokens holding '"', '}' or ']' where the mask allows any:
// still only allowed tokens, so every finished output must validate.
Walk walk(const std::shared_ptr<const CompiledGrammar>& g,
          const std::shared_ptr<const TokenizerInfo>& info, const std::vector<uint32_t>& closing,
          int32_t eos, uint64_t seed, int max_tokens, Clock::time_point deadline,
          const std::shared_ptr<MaskCache>& cache, std::vector<double>* times,
          std::ostream* slow_log, const std::string& file, int walk_index) {
  std::mt19937_64 rng(seed);
  GrammarMatcher m(g, info, cache);
  std::vector<uint32_t> mask(info->mask_words()), pick(info->mask_words());
  std::vector<int32_t> ids;
  Walk w{"cap", ""};
  for (int step = 0; step < max_tokens; ++step) {
    if (Clock::now() > deadline) {
      w.status = "time_budget";
      return w;
    }
    auto t0 = Clock::now();
    const bool filled = m.fill_next_token_bitmask(mask.data());
    times->push_back(us_since(t0));
    if (slow_log && times->back() > 100) {
      std::string tail = w.out.substr(w.out.size() > 60 ? w.out.size() - 60 : 0);
      for (char& c : tail)
        if (c == '\n' || c == '\t') c = ' ';
      *slow_log << file << '\t' << walk_index << '\t' << step << '\t' << times->back() << '\t'
                << m.last_work() << '\t' << tail << '\n';
    }
    if (!filled) {
      w.status = "work_budget";
      return w;
    }
    const bool bias = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    const bool stop_ok = (mask[eos / 32] >> (eos % 32)) & 1;
    int32_t id = -1;
    if (bias && stop_ok) id = eos;
    for (int pass = bias ? 0 : 1; id < 0 && pass < 2; ++pass) {
      ids.clear();
      for (int32_t wi = 0; wi < info->mask_words(); ++wi) {
        for (uint32_t bits = mask[wi] & (pass == 0 ? closing[wi] : ~0u); bits; bits &= bits - 1)
          ids.push_back(wi * 32 + __builtin_ctz(bits));
      }
      if (!ids.empty()) id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    }
    if (id < 0) {
      w.status = "dead";  // nothing allowed and not terminated: a matcher bug
      return w;
    }
    if (!m.accept_token(id)) {
      w.status = m.work_budget_exceeded() ? "work_budget" : "refused";
      return w;
    }
    if (id == eos) {
      w.status = "done";
      return w;
    }
    w.out += info->token_bytes(id);
  }
  return w;
}

}  // namespace

constexpr const char* kUsage =
    "usage: schema_corpus_bench [--corpus DIR] [--tokenizer DIR] [--walks N] [--max-tokens N]\n"
    "         [--seed N] [--item-budget-s S] [--workdir DIR] [--only SUBSTR] [--validate 0|1]\n"
    "         [--python PATH] [--list-errors 0|1] [--slow-log PATH]\n"
    "Compiles every schema of the corpus, walks each with random allowed tokens, validates the\n"
    "finished walks with python3-jsonschema and prints coverage, soundness and mask times.\n";

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n%s", k.c_str(), kUsage);
      return 2;
    }
    std::string v = argv[i + 1];
    if (k == "--corpus")
      a.corpus = v;
    else if (k == "--tokenizer")
      a.tokenizer = v;
    else if (k == "--workdir")
      a.workdir = v;
    else if (k == "--only")
      a.only = v;
    else if (k == "--python")
      a.python = v;
    else if (k == "--walks")
      a.walks = std::atoi(v.c_str());
    else if (k == "--max-tokens")
      a.max_tokens = std::atoi(v.c_str());
    else if (k == "--seed")
      a.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--item-budget-s")
      a.item_budget_s = std::atof(v.c_str());
    else if (k == "--validate")
      a.validate = v != "0";
    else if (k == "--list-errors")
      a.list_errors = v != "0";
    else if (k == "--slow-log")
      a.slow_log = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n%s", k.c_str(), kUsage);
      return 2;
    }
  }
  auto tok = deepinfer::tokenizer::Tokenizer::from_file(a.tokenizer);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto eos_id = (*tok)->token_to_id("<｜end▁of▁sentence｜>");
  if (!eos_id) {
    std::fprintf(stderr, "no end-of-sentence token\n");
    return 1;
  }
  const int32_t eos = *eos_id;
  auto info_or = TokenizerInfo::from_tokenizer(**tok, {eos});
  if (!info_or.ok()) {
    std::fprintf(stderr, "%s\n", info_or.status().to_string().c_str());
    return 1;
  }
  std::shared_ptr<const TokenizerInfo> info = *info_or;
  std::vector<uint32_t> closing(info->mask_words());
  for (int32_t id = 0; id < info->vocab_size(); ++id) {
    if (info->token_bytes(id).find_first_of("\"}]") != std::string::npos)
      closing[id / 32] |= 1u << (id % 32);
  }

  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(a.corpus)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".json" && name.find(a.only) != std::string::npos)
      files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  std::filesystem::create_directories(a.workdir);
  const std::string walks_path = a.workdir + "/walks.jsonl";
  std::ofstream walks_out(walks_path);
  std::ofstream slow_out;
  if (!a.slow_log.empty()) slow_out.open(a.slow_log);

  int compiled = 0;
  std::map<std::string, int> first_tally, named_tally, status_tally;
  std::vector<std::pair<std::string, std::string>> errors;
  std::vector<double> compile_ms, masks, cold_masks;
  // Schemas with a length bound of 4096 or more (a long counted string), reported apart.
  std::vector<double> long_bound_masks;
  std::set<std::string> long_bound_files;
  static const std::regex kLengthBound(R"re("m(?:ax|in)Length"\s*:\s*(\d+))re");
  std::vector<std::pair<double, std::string>> slowest;  // (max mask us, file)
  std::map<std::string, int> over_goal;                 // masks over 100 us, by file
  for (const std::string& f : files) {
    std::ifstream in(a.corpus + "/" + f);
    std::stringstream text;
    text << in.rdbuf();
    auto t0 = Clock::now();
    auto g = deepinfer::grammar::compile_json_schema_text(text.str());
    if (!g.ok()) {
      ++first_tally[first_blocker(g.status())];
      for (const std::string& k : named_keywords(g.status())) ++named_tally[k];
      errors.emplace_back(f, g.status().to_string());
      continue;
    }
    bool long_bound = false;
    const std::string schema_text = text.str();
    for (auto it = std::sregex_iterator(schema_text.begin(), schema_text.end(), kLengthBound);
         it != std::sregex_iterator(); ++it)
      long_bound = long_bound || std::stoll((*it)[1].str().substr(0, 12)) >= 4096;
    if (long_bound) long_bound_files.insert(f);
    // Compiled for the tokenizer's longest token, as the engine compiles so_args.
    auto cg = std::make_shared<const CompiledGrammar>(std::move(*g), info->max_token_bytes());
    compile_ms.push_back(us_since(t0) / 1000);
    ++compiled;
    // The schema's walks share one cache, as the engine's requests with one so_args do; the
    // first walk starts cold.
    auto cache = std::make_shared<MaskCache>(info->mask_words(), size_t{16} << 20);
    const auto deadline =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(a.item_budget_s * 1e6));
    const uint64_t base = std::hash<std::string>{}(f) ^ (a.seed * 0x9E3779B97F4A7C15ull);
    double worst = 0;
    for (int w = 0; w < a.walks; ++w) {
      std::vector<double> t;
      Walk r = walk(cg, info, closing, eos, base + w, a.max_tokens, deadline, cache, &t,
                    a.slow_log.empty() ? nullptr : &slow_out, f, w);
      ++status_tally[r.status];
      if (r.status == "dead" || r.status == "refused")
        std::printf("BUG: %s walk %d: %s after '%s'\n", f.c_str(), w, r.status.c_str(),
                    r.out.substr(r.out.size() > 300 ? r.out.size() - 300 : 0).c_str());
      if (r.status == "done")
        walks_out << "{\"file\":\"" << f << "\",\"walk\":" << w << ",\"hex\":\"" << hex(r.out)
                  << "\"}\n";
      masks.insert(masks.end(), t.begin(), t.end());
      if (w == 0) cold_masks.insert(cold_masks.end(), t.begin(), t.end());
      if (long_bound) long_bound_masks.insert(long_bound_masks.end(), t.begin(), t.end());
      for (double x : t) {
        worst = std::max(worst, x);
        if (x > 100) ++over_goal[f];
      }
    }
    slowest.emplace_back(worst, f);
  }
  walks_out.close();

  const int n = static_cast<int>(files.size());
  std::printf("corpus: %s (%d schemas), tokenizer %s\n", a.corpus.c_str(), n, a.tokenizer.c_str());
  std::printf("walks: %d per schema, <= %d tokens, seed %llu, <= %.0f s per schema\n\n", a.walks,
              a.max_tokens, static_cast<unsigned long long>(a.seed), a.item_budget_s);
  if (a.list_errors)
    for (const auto& [f, e] : errors) std::printf("REFUSED %s: %s\n", f.c_str(), e.c_str());
  auto print_tally = [&](const char* title, const std::map<std::string, int>& t) {
    std::vector<std::pair<int, std::string>> v;
    for (const auto& [k, c] : t) v.emplace_back(-c, k);
    std::sort(v.begin(), v.end());
    std::printf("%s\n", title);
    for (const auto& [c, k] : v) std::printf("  %4d  %s\n", -c, k.c_str());
  };
  print_tally("refusals by first blocker (schemas):", first_tally);
  print_tally("unsupported keywords named in refusals (schemas naming each):", named_tally);
  std::printf("\nwalk endings:");
  for (const auto& [k, c] : status_tally) std::printf(" %s %d", k.c_str(), c);
  std::printf("\n");
  std::sort(slowest.rbegin(), slowest.rend());
  std::printf("slowest masks:");
  for (size_t i = 0; i < std::min<size_t>(5, slowest.size()); ++i)
    std::printf(" %s %.0f us;", slowest[i].second.c_str(), slowest[i].first);
  std::printf("\n");
  {
    std::vector<std::pair<int, std::string>> v;
    int total = 0;
    for (const auto& [f, c] : over_goal) v.emplace_back(-c, f), total += c;
    std::sort(v.begin(), v.end());
    std::printf("masks over 100 us: %d, most in:", total);
    for (size_t i = 0; i < std::min<size_t>(8, v.size()); ++i)
      std::printf(" %s %d;", v[i].second.c_str(), -v[i].first);
    std::printf("\n\n");
  }

  std::string validation = "not run (--validate 0)";
  int valid_rc = 0;
  if (a.validate) {
    std::string cmd = a.python + " " + DEEPINFER_SOURCE_DIR +
                      "/bench/schema_corpus/validate_walks.py --corpus " + a.corpus + " --walks " +
                      walks_path + " > " + a.workdir + "/validation.txt 2>&1";
    valid_rc = std::system(cmd.c_str());
    std::ifstream vin(a.workdir + "/validation.txt");
    std::string line;
    validation.clear();
    while (std::getline(vin, line)) std::printf("  %s\n", line.c_str());
  }
  const double share = n ? 100.0 * compiled / n : 0;
  const double med = percentile(masks, 0.5), p99 = percentile(masks, 0.99);
  std::printf("\nschemas compiled  %d / %d = %.1f%%   goal >= 95%%   ratio %.2f\n", compiled, n,
              share, share / 95);
  std::printf("soundness         %s   goal 100%% of finished walks valid\n",
              a.validate ? (valid_rc == 0 ? "every finished walk valid" : "INVALID OUTPUTS (above)")
                         : validation.c_str());
  std::printf("mask median       %8.1f us   (%zu masks)\n", med, masks.size());
  std::printf("mask p99          %8.1f us   goal <= 100 us   ratio %.2f\n", p99, p99 / 100);
  std::printf("first walks only (cold cache): median %.1f us, p99 %.1f us (%zu masks)\n",
              percentile(cold_masks, 0.5), percentile(cold_masks, 0.99), cold_masks.size());
  std::printf("length bound >= 4096 (%zu schemas): median %.1f us, p99 %.1f us (%zu masks)\n",
              long_bound_files.size(), percentile(long_bound_masks, 0.5),
              percentile(long_bound_masks, 0.99), long_bound_masks.size());
  std::printf("compile median    %8.2f ms, p99 %.2f ms\n", percentile(compile_ms, 0.5),
              percentile(compile_ms, 0.99));
  return valid_rc == 0 ? 0 : 1;
}
