// Single-thread encode throughput (MB/s) of our tokenizer on a mixed corpus of >= 10 MB, with
// HF tokenizers (npm binding) run on the same corpus in the same run when it is installed.
//
// Usage: tokenizer_bench [--tokenizer DIR] [--mb N] [--reps N] [--corpus-out FILE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "deepinfer/tokenizer/tokenizer.h"

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Real text (specs, conformance texts, our own C++ sources) interleaved with generated text
// that has many distinct words, CJK runs, numbers and emoji, so the word cache cannot make
// the BPE merge loop disappear.
std::vector<std::string> build_corpus(size_t target_bytes) {
  namespace fs = std::filesystem;
  std::vector<std::string> real;
  for (const char* dir : {DEEPINFER_SHARED_DIR "/spec", DEEPINFER_SOURCE_DIR "/src"}) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      auto ext = it->path().extension();
      if (ext == ".md" || ext == ".cc" || ext == ".h") real.push_back(read_file(it->path()));
    }
  }
  {
    std::ifstream f(DEEPINFER_SHARED_DIR "/conformance/tokenizer_deepseek_v3.jsonl");
    std::string line, all;
    while (std::getline(f, line))
      all += nlohmann::json::parse(line)["text"].get<std::string>() + "\n";
    real.push_back(all);
  }
  std::mt19937 rng(2024);
  static const char* kSyll[] = {"ka",  "lo",  "ren", "ti", "sha", "mu", "der", "on", "ex", "qui",
                                "zor", "ath", "ing", "ly", "pre", "st", "ua",  "ve", "ck", "io"};
  static const char* kEmoji[] = {"😀", "🚀", "👍🏽", "🇯🇵", "👨‍👩‍👧", "🌍"};
  auto gen_doc = [&](size_t n) {
    std::string s;
    while (s.size() < n) {
      switch (rng() % 10) {
        case 0: {  // CJK run
          std::string cp;
          for (int k = 0, m = 1 + rng() % 12; k < m; ++k) {
            char32_t c = 0x4E00 + rng() % 0x51A5;
            cp += static_cast<char>(0xE0 | (c >> 12));
            cp += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            cp += static_cast<char>(0x80 | (c & 0x3F));
          }
          s += cp + "，";
          break;
        }
        case 1:
          s += " " + std::to_string(rng() % 1000000) + "." + std::to_string(rng() % 100);
          break;
        case 2:
          s += kEmoji[rng() % 6];
          break;
        case 3:
          s += (rng() % 4 ? ", " : ".\n");
          break;
        default: {
          std::string w = " ";
          for (int k = 0, m = 1 + rng() % 4; k < m; ++k) w += kSyll[rng() % 20];
          if (rng() % 7 == 0) w[1] = static_cast<char>(std::toupper(w[1]));
          s += w;
        }
      }
    }
    return s;
  };
  std::vector<std::string> docs;
  size_t total = 0, r = 0;
  while (total < target_bytes) {
    std::string d;
    if (r % 2 == 0) {
      // A ~16 KB window of real text, starting at a line boundary.
      const std::string& src = real[(r / 2) % real.size()];
      size_t start = src.size() > 16384 ? rng() % (src.size() - 16384) : 0;
      start = src.rfind('\n', start) == std::string::npos ? 0 : src.rfind('\n', start) + 1;
      d = src.substr(start, 16384);
      // Do not cut a UTF-8 character in half.
      while (!d.empty() && (static_cast<unsigned char>(d.back()) & 0xC0) == 0x80) d.pop_back();
      if (!d.empty() && static_cast<unsigned char>(d.back()) >= 0xC0) d.pop_back();
    } else {
      d = gen_doc(16384);
    }
    total += d.size();
    docs.push_back(std::move(d));
    ++r;
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_dir = DEEPINFER_SHARED_DIR "/tokenizers/deepseek_v3";
  double mb = 12;
  int reps = 3;
  std::string corpus_out;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--tokenizer")
      tok_dir = argv[i + 1];
    else if (a == "--mb")
      mb = std::atof(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--corpus-out")
      corpus_out = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  auto tok = deepinfer::tokenizer::Tokenizer::from_file(tok_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto docs = build_corpus(static_cast<size_t>(mb * 1e6));
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();

  double best = 1e30;
  size_t tokens = 0;
  uint32_t checksum = 0;
  std::vector<int32_t> ids;
  for (int r = 0; r < reps; ++r) {
    tokens = 0;
    checksum = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& d : docs) {
      ids.clear();
      if (!(*tok)->encode_into(d, true, &ids).ok()) return 1;
      for (int32_t id : ids) checksum = checksum * 31u + static_cast<uint32_t>(id);
      tokens += ids.size();
    }
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  double ours = bytes / 1e6 / best;
  std::printf("corpus: %zu documents, %.2f MB, %zu tokens (%s)\n", docs.size(), bytes / 1e6, tokens,
              tok_dir.c_str());
  std::printf("deepinfer tokenizer: %.2f MB/s single thread (best of %d, %.3f s)\n", ours, reps,
              best);

  // Peer: HF tokenizers through Node, on the very same documents.
  std::string script = DEEPINFER_SOURCE_DIR "/bench/hf_tokenizers_bench.js";
  std::string module = DEEPINFER_SOURCE_DIR "/bench/node_modules/tokenizers";
  if (!std::filesystem::exists(module) || std::system("node --version >/dev/null 2>&1") != 0) {
    std::printf("HF tokenizers: not installed (run bench/install_hf_tokenizers.sh); no ratio\n");
    return 0;
  }
  std::string path =
      corpus_out.empty()
          ? (std::filesystem::temp_directory_path() / "deepinfer_tok_corpus.jsonl").string()
          : corpus_out;
  {
    std::ofstream f(path, std::ios::binary);
    for (const auto& d : docs) f << nlohmann::json(d).dump() << "\n";
  }
  std::string json_path =
      std::filesystem::is_directory(tok_dir) ? tok_dir + "/tokenizer.json" : tok_dir;
  std::string cmd = "RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false node '" + script + "' '" +
                    path + "' '" + json_path + "' " + std::to_string(reps);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && fgets(buf, sizeof(buf), p)) out += buf;
  if (p) pclose(p);
  if (corpus_out.empty()) std::filesystem::remove(path);
  nlohmann::json hf;
  try {
    hf = nlohmann::json::parse(out);
  } catch (...) {
    std::printf("HF tokenizers: run failed: %s\n", out.c_str());
    return 0;
  }
  if (hf.contains("error")) {
    std::printf("HF tokenizers: %s\n", hf["error"].get<std::string>().c_str());
    return 0;
  }
  double theirs = hf["mb_per_s"];
  bool same = hf["tokens"] == tokens && hf["checksum"] == checksum;
  std::printf("HF tokenizers 0.23.2 (npm, Rust): %.2f MB/s single thread (best of %d)\n", theirs,
              reps);
  std::printf("ratio deepinfer / HF: %.2fx; token ids %s (%zu tokens)\n", ours / theirs,
              same ? "identical" : "DIFFER", tokens);
  return same ? 0 : 1;
}
