// Drives GrammarMatcher over the real tokenizer for the acceptance corpus. Reads jobs (JSON
// lines: id, kind, source, docs) and writes JSON lines: compile results, completeness results
// (each document's tokenization accepted token by token, each token in the mask beforehand),
// and seeded random walks (uniform among the tokens the mask allows). It judges nothing about
// walk outputs; check_corpus.py validates them with independent validators.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/grammar/ebnf_parser.h"
#include "deepinfer/grammar/grammar_matcher.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/regex_parser.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace {

using deepinfer::StatusOr;
using deepinfer::grammar::CompiledGrammar;
using deepinfer::grammar::Grammar;
using deepinfer::grammar::GrammarMatcher;
using deepinfer::grammar::TokenizerInfo;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string tokenizer, jobs, out;
  int walks = 2;
  uint64_t seed = 1;
  int walk_first = 0, walk_last = -1;  // --walk-range A:B; -1 = all
  int max_tokens = 256;
  int shard = 0, shards = 1;
  bool docs = true;
  double item_budget_s = 0;  // > 0: stop an item's walks once they took this long (reported)
};

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
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

StatusOr<Grammar> compile(const Json& job) {
  const std::string kind = job.at("kind").get<std::string>();
  if (kind == "json_schema") return deepinfer::grammar::compile_json_schema(job.at("source"));
  if (kind == "json_object") return deepinfer::grammar::json_object_grammar();
  if (kind == "regex") return deepinfer::grammar::parse_regex(job.at("source").get<std::string>());
  if (kind == "ebnf") return deepinfer::grammar::parse_ebnf(job.at("source").get<std::string>());
  return deepinfer::invalid_argument("unknown kind " + kind);
}

bool allowed(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id / 32] >> (id % 32)) & 1;
}

// The r-th set bit of the mask (0-based), and the number of set bits.
int64_t count_bits(const std::vector<uint32_t>& mask) {
  int64_t n = 0;
  for (uint32_t w : mask) n += __builtin_popcount(w);
  return n;
}
int32_t nth_bit(const std::vector<uint32_t>& mask, int64_t r) {
  for (size_t i = 0; i < mask.size(); ++i) {
    int c = __builtin_popcount(mask[i]);
    if (r < c) {
      uint32_t w = mask[i];
      for (int k = 0; k < r; ++k) w &= w - 1;
      return static_cast<int32_t>(i * 32 + __builtin_ctz(w));
    }
    r -= c;
  }
  return -1;
}

struct Ctx {
  const deepinfer::tokenizer::Tokenizer* tok;
  std::shared_ptr<const TokenizerInfo> info;
  int32_t eos;
  double mask_ms = 0;
  int64_t masks = 0;
};

Json check_doc(Ctx& c, const std::shared_ptr<const CompiledGrammar>& g, const std::string& doc) {
  Json r = {{"type", "doc"}, {"ok", false}};
  auto ids = c.tok->encode(doc, /*parse_special=*/false);
  if (!ids.ok()) {
    r["fail"] = "tokenizer: " + ids.status().to_string();
    return r;
  }
  GrammarMatcher m(g, c.info);
  std::vector<uint32_t> mask(c.info->mask_words());
  std::string prefix;
  r["tokens"] = ids->size();
  for (size_t i = 0; i < ids->size(); ++i) {
    int32_t id = (*ids)[i];
    auto t = Clock::now();
    if (!m.fill_next_token_bitmask(mask.data())) {
      r["fail"] = "work budget";
      r["at"] = i;
      return r;
    }
    c.mask_ms += ms_since(t);
    ++c.masks;
    if (!allowed(mask, id)) {
      r["fail"] = "token not in mask";
      r["at"] = i;
      r["accepted_hex"] = hex(prefix);
      r["token_hex"] = hex(c.info->token_bytes(id));
      return r;
    }
    if (!m.accept_token(id)) {
      r["fail"] = "token in mask but accept_token refused it";
      r["at"] = i;
      return r;
    }
    prefix += c.info->token_bytes(id);
  }
  m.fill_next_token_bitmask(mask.data());
  if (!m.can_terminate() || !allowed(mask, c.eos) || !m.accept_token(c.eos) || !m.is_terminated()) {
    r["fail"] = "document accepted but the matcher cannot terminate after it";
    return r;
  }
  r["ok"] = true;
  return r;
}

// A walk past `deadline` stops with status "budget" (reported apart from passes, like "cap").
Json walk(Ctx& c, const std::shared_ptr<const CompiledGrammar>& g, uint64_t seed, int max_tokens,
          std::optional<Clock::time_point> deadline) {
  std::mt19937_64 rng(seed);
  GrammarMatcher m(g, c.info);
  std::vector<uint32_t> mask(c.info->mask_words());
  std::string out;
  Json r = {{"type", "walk"}};
  auto start = Clock::now();
  int steps = 0;
  std::string status = "cap";
  for (; steps < max_tokens; ++steps) {
    auto t = Clock::now();
    if (deadline && t > *deadline) {
      status = "budget";
      break;
    }
    const bool filled = m.fill_next_token_bitmask(mask.data());
    c.mask_ms += ms_since(t);
    ++c.masks;
    if (!filled) {
      status = "work_budget";  // the matcher's per-mask work budget ran out (not a bug)
      break;
    }
    int64_t n = count_bits(mask);
    if (n == 0) {
      status = "dead";  // no token allowed and not terminated: a matcher bug
      break;
    }
    int32_t id = nth_bit(mask, std::uniform_int_distribution<int64_t>(0, n - 1)(rng));
    if (!m.accept_token(id)) {
      // The mask allowed a token accept_token refuses: a matcher bug, unless out of budget.
      status = m.work_budget_exceeded() ? "work_budget" : "refused";
      r["token"] = id;
      break;
    }
    if (id == c.eos) {
      status = "done";
      ++steps;
      break;
    }
    out += c.info->token_bytes(id);
  }
  r["status"] = status;
  r["tokens"] = steps;
  r["hex"] = hex(out);
  r["ms"] = ms_since(start);
  return r;
}

int run(const Args& a) {
  auto tok = deepinfer::tokenizer::Tokenizer::from_file(a.tokenizer);
  if (!tok.ok()) {
    std::cerr << tok.status().to_string() << "\n";
    return 2;
  }
  auto eos = (*tok)->token_to_id("<｜end▁of▁sentence｜>");
  if (!eos) {
    std::cerr << "no end-of-sentence token\n";
    return 2;
  }
  auto t0 = Clock::now();
  auto info = TokenizerInfo::from_tokenizer(**tok, {*eos});
  if (!info.ok()) {
    std::cerr << info.status().to_string() << "\n";
    return 2;
  }
  Ctx c{tok->get(), *info, *eos};
  std::ifstream in(a.jobs);
  std::ofstream out(a.out);
  out << Json{{"type", "tokenizer"}, {"ms", ms_since(t0)}}.dump() << "\n";
  std::string line;
  int index = -1;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (++index % a.shards != a.shard) continue;
    Json job = Json::parse(line);
    std::string id = job.at("id").get<std::string>();
    auto t = Clock::now();
    auto g = compile(job);
    Json cr = {{"type", "compile"}, {"id", id}, {"ok", g.ok()}, {"ms", ms_since(t)}};
    if (!g.ok()) cr["error"] = g.status().to_string();
    out << cr.dump() << "\n";
    if (!g.ok()) continue;
    auto cg = std::make_shared<const CompiledGrammar>(std::move(*g), c.info->max_token_bytes());
    if (a.docs && job.contains("docs")) {
      for (size_t i = 0; i < job["docs"].size(); ++i) {
        auto td = Clock::now();
        Json r = check_doc(c, cg, job["docs"][i].get<std::string>());
        r["ms"] = ms_since(td);
        r["id"] = id;
        r["index"] = i;
        out << r.dump() << "\n";
      }
    }
    const int walks = job.value("walks", a.walks);
    // --walk-range: this process does walks [first, last) of the item (same seeds as one
    // process doing them all), so a slow item can be split across processes.
    const int first = std::min(walks, a.walk_first);
    const int last = a.walk_last < 0 ? walks : std::min(walks, a.walk_last);
    uint64_t base = std::hash<std::string>{}(id) ^ (a.seed * 0x9E3779B97F4A7C15ull);
    auto tw = Clock::now();
    std::optional<Clock::time_point> deadline;
    if (a.item_budget_s > 0) {
      deadline = tw + std::chrono::microseconds(static_cast<int64_t>(a.item_budget_s * 1e6));
    }
    int w = first;
    for (; w < last; ++w) {
      if (deadline && Clock::now() > *deadline) break;
      Json r = walk(c, cg, base + static_cast<uint64_t>(w), a.max_tokens, deadline);
      r["id"] = id;
      r["index"] = w;
      out << r.dump() << "\n";
    }
    out << Json{{"type", "walks"}, {"id", id}, {"requested", last - first}, {"done", w - first}}
               .dump()
        << "\n";
    out.flush();
  }
  out << Json{{"type", "summary"}, {"masks", c.masks}, {"mask_ms", c.mask_ms}}.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--tokenizer") {
      a.tokenizer = v;
    } else if (k == "--jobs") {
      a.jobs = v;
    } else if (k == "--out") {
      a.out = v;
    } else if (k == "--walks") {
      a.walks = std::stoi(v);
    } else if (k == "--seed") {
      a.seed = std::stoull(v);
    } else if (k == "--max-tokens") {
      a.max_tokens = std::stoi(v);
    } else if (k == "--shard") {
      a.shard = std::stoi(v.substr(0, v.find('/')));
      a.shards = std::stoi(v.substr(v.find('/') + 1));
    } else if (k == "--item-budget-s") {
      a.item_budget_s = std::stod(v);
    } else if (k == "--walk-range") {
      a.walk_first = std::stoi(v.substr(0, v.find(':')));
      a.walk_last = std::stoi(v.substr(v.find(':') + 1));
    } else if (k == "--docs") {
      a.docs = v != "0";
    } else {
      std::cerr << "unknown flag " << k << "\n";
      return 2;
    }
  }
  if (a.tokenizer.empty() || a.jobs.empty() || a.out.empty()) {
    std::cerr << "usage: grammar_walk --tokenizer DIR --jobs IN.jsonl --out OUT.jsonl "
                 "[--walks N] [--seed S] [--max-tokens M] [--shard i/n] [--docs 0|1] "
                 "[--item-budget-s S] [--walk-range A:B]\n";
    return 2;
  }
  return run(a);
}
