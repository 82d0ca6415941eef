// deepinfer generate: greedy generation on the CPU reference model (the engine-backed version with
// sampling flags replaces this loop in the engine issue).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/tokenizer/incremental_detokenizer.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace {

using deepinfer::Status;

Status parse_ids(const std::string& s, std::vector<int32_t>* ids) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids->push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return deepinfer::invalid_argument("--prompt-ids: '" + item + "' is not a token id");
    }
  }
  if (ids->empty()) return deepinfer::invalid_argument("--prompt-ids: no ids given");
  return deepinfer::ok_status();
}

int fail(const Status& st) {
  std::cerr << "deepinfer generate: " << st.to_string() << "\n";
  return 1;
}

int run_generate(int argc, char** argv) {
  std::string model_arg, prompt, prompt_ids, numerics = "official";
  int max_tokens = 16;
  bool ignore_eos = false, quiet = false;
  CLI::App app{
      "Greedy generation on the CPU reference model. With no MODEL_DIR: "
      "$DEEPINFER_HF_MODEL_DIR, else the embedded default tiny model.",
      "deepinfer generate"};
  app.add_option("MODEL_DIR", model_arg, "checkpoint directory (config.json + safetensors)");
  auto* text_opt = app.add_option("--prompt", prompt, "prompt text (needs tokenizer.json)");
  app.add_option("--prompt-ids", prompt_ids, "prompt token ids, comma separated")
      ->excludes(text_opt);
  app.add_option("--max-tokens", max_tokens, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--numerics", numerics, "official (simulated quantization) or plain")
      ->capture_default_str();
  app.add_flag("--ignore-eos", ignore_eos, "keep going past the end-of-sequence token");
  app.add_flag("-q,--quiet", quiet, "no progress or timing on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (prompt.empty() && prompt_ids.empty())
    return fail(deepinfer::invalid_argument("give --prompt TEXT or --prompt-ids 1,2,3"));
  auto num = deepinfer::v4::parse_numerics(numerics);
  if (!num.ok()) return fail(num.status().with_context("--numerics"));
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) return fail(dir.status());

  auto t0 = std::chrono::steady_clock::now();
  int64_t last_pct = -1;
  auto model = deepinfer::v4::CpuModel::load(
      *dir, {*num, std::nullopt}, [&](const deepinfer::v4::LoadProgress& p) {
        int64_t pct = p.bytes_total ? 100 * p.bytes_done / p.bytes_total : 100;
        if (!quiet && (pct / 10 != last_pct / 10 || p.tensors_done == p.tensors_total)) {
          std::fprintf(stderr, "\rloading %s: %lld/%lld tensors, %.1f/%.1f MB", dir->c_str(),
                       (long long)p.tensors_done, (long long)p.tensors_total, p.bytes_done / 1e6,
                       p.bytes_total / 1e6);
          last_pct = pct;
        }
      });
  if (!quiet) std::fprintf(stderr, "\n");
  if (!model.ok()) return fail(model.status());

  std::unique_ptr<deepinfer::tokenizer::Tokenizer> tok;
  std::vector<int32_t> ids;
  if (!prompt.empty()) {
    auto t = deepinfer::tokenizer::Tokenizer::from_file(*dir);
    if (!t.ok()) return fail(t.status().with_context("--prompt needs the model's tokenizer"));
    tok = std::move(t).value();
    auto enc = tok->encode(prompt);
    if (!enc.ok()) return fail(enc.status());
    ids = std::move(enc).value();
    if (ids.empty()) return fail(deepinfer::invalid_argument("--prompt encodes to no tokens"));
  } else {
    Status st = parse_ids(prompt_ids, &ids);
    if (!st.ok()) return fail(st);
  }

  const auto& m = **model;
  auto state = m.new_sequence();
  std::vector<float> logits;
  auto t1 = std::chrono::steady_clock::now();
  Status st = m.forward(state, ids.data(), static_cast<int64_t>(ids.size()), false, &logits);
  if (!st.ok()) return fail(st);
  auto t2 = std::chrono::steady_clock::now();
  std::unique_ptr<deepinfer::tokenizer::IncrementalDetokenizer> detok;
  if (tok) detok = std::make_unique<deepinfer::tokenizer::IncrementalDetokenizer>(*tok);
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    int32_t best = 0;
    for (int32_t v = 1; v < static_cast<int32_t>(logits.size()); ++v)
      if (logits[v] > logits[best]) best = v;
    out.push_back(best);
    if (detok) {
      std::string delta;
      if (detok->push(best, &delta).ok()) std::cout << delta << std::flush;
    }
    if (best == m.config().eos_token_id && !ignore_eos) break;
    if (i + 1 == max_tokens) break;
    st = m.forward(state, &best, 1, false, &logits);
    if (!st.ok()) return fail(st);
  }
  auto t3 = std::chrono::steady_clock::now();
  if (detok) {
    std::string delta;
    detok->finish(&delta);
    std::cout << delta << "\n";
  } else {
    for (size_t i = 0; i < out.size(); ++i) std::cout << (i ? "," : "") << out[i];
    std::cout << "\n";
  }
  if (!quiet) {
    using sec = std::chrono::duration<double>;
    double pre = sec(t2 - t1).count(), dec = sec(t3 - t2).count();
    std::fprintf(stderr,
                 "load %.2f s; prefill %zu tokens %.3f s (%.0f tok/s); decode %zu tokens %.3f s "
                 "(%.0f tok/s)\n",
                 sec(t1 - t0).count(), ids.size(), pre, ids.size() / pre, out.size(), dec,
                 out.size() > 1 ? (out.size() - 1) / dec : 0.0);
  }
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kGenerate, "generate",
                           "greedy generation on the CPU reference (default: embedded tiny model)",
                           run_generate);
