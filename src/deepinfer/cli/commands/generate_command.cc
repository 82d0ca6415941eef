// deepinfer generate: one request through the engine, streamed to stdout. Greedy by default.
// With --prompt-ids the output is the generated ids (comma separated); with --prompt, the text.
// --regex / --json-schema / --ebnf / --json-object constrain the output (so_args).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <sstream>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/engine_flags.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/cli/sampling_flags.h"
#include "deepinfer/engine/engine.h"

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

int run_generate(int argc, char** argv) {
  std::string model_arg, prompt, prompt_ids;
  deepinfer::EngineArgs args;
  deepinfer::GenerateRequest req;
  req.params.temperature = 0;
  std::vector<std::string> stop;
  uint64_t seed = 0;
  bool has_seed = false, quiet = false;
  CLI::App app{
      "Generate from a prompt on the engine (--device cpu or cuda). With no MODEL_DIR: "
      "$DEEPINFER_HF_MODEL_DIR, else the embedded default tiny model.",
      "deepinfer generate"};
  app.add_option("MODEL_DIR", model_arg, "checkpoint directory (config.json + safetensors)");
  auto* text_opt = app.add_option("--prompt", prompt, "prompt text (needs tokenizer.json)");
  app.add_option("--prompt-ids", prompt_ids, "prompt token ids, comma separated; prints ids")
      ->excludes(text_opt);
  deepinfer::cli::add_sampling_flags(app, &req.params, &stop, &seed, &has_seed);
  deepinfer::cli::StructuredOutputFlags so_flags;
  deepinfer::cli::add_structured_output_flags(app, &so_flags);
  deepinfer::cli::add_engine_flags(app, &args);
  app.add_flag("-q,--quiet", quiet, "no timing on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status st = deepinfer::cli::resolve_engine_device(&args); !st.ok())
    return deepinfer::cli::command_failed("generate", st);
  if (prompt.empty() && prompt_ids.empty())
    return deepinfer::cli::command_failed(
        "generate", deepinfer::invalid_argument("give --prompt TEXT or --prompt-ids 1,2,3"));
  if (!prompt_ids.empty()) {
    Status st = parse_ids(prompt_ids, &req.prompt_ids);
    if (!st.ok()) return deepinfer::cli::command_failed("generate", st);
  } else {
    req.prompt = prompt;
  }
  req.params.stop = stop;
  if (has_seed) req.params.seed = seed;
  auto so = deepinfer::cli::structured_output_from_flags(so_flags);
  if (!so.ok()) return deepinfer::cli::command_failed("generate", so.status());
  req.params.so_args = *so;
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) return deepinfer::cli::command_failed("generate", dir.status());
  args.model = *dir;
  int last_decile = -1;
  const bool tty = isatty(STDERR_FILENO);
  if (!quiet)
    args.on_load_progress = [&](int64_t t, int64_t tt, int64_t b, int64_t bt) {
      int decile = bt ? static_cast<int>(10 * b / bt) : 10;
      if ((decile == last_decile || !tty) && t != tt) return;  // a log gets the last line only
      last_decile = decile;
      std::fprintf(stderr, "\rloading %s: %lld/%lld tensors, %.1f/%.1f MB%s", args.model.c_str(),
                   (long long)t, (long long)tt, b / 1e6, bt / 1e6, t == tt ? "\n" : "");
    };
  auto t0 = std::chrono::steady_clock::now();
  auto engine = deepinfer::Engine::create(args);
  if (!engine.ok()) return deepinfer::cli::command_failed("generate", engine.status());
  auto t1 = std::chrono::steady_clock::now();
  if (!quiet) deepinfer::cli::print_engine_capacity("generate", (*engine)->capacity());
  const bool ids_out = !req.prompt_ids.empty();
  std::promise<deepinfer::RequestOutput> done;
  size_t printed = 0;
  Status st = (*engine)->submit(req, [&](const deepinfer::RequestOutput& o) {
    const auto& c = o.outputs[0];
    if (ids_out) {
      for (; printed < c.token_ids.size(); ++printed)
        std::cout << (printed ? "," : "") << c.token_ids[printed];
    } else {
      std::cout << c.delta_text;
    }
    std::cout << std::flush;
    if (o.finished) done.set_value(o);
  });
  if (!st.ok()) return deepinfer::cli::command_failed("generate", st);
  deepinfer::RequestOutput out = done.get_future().get();
  std::cout << "\n";
  // A request the engine took and then ended on an error (one the pool can never hold, a
  // failed step) finishes as "abort" with its reason here.
  if (!out.status.ok()) return deepinfer::cli::command_failed("generate", out.status);
  auto t2 = std::chrono::steady_clock::now();
  if (!quiet) {
    using sec = std::chrono::duration<double>;
    const auto& c = out.outputs[0];
    double gen = sec(t2 - t1).count();
    std::fprintf(stderr,
                 "load %.2f s; %lld prompt + %zu generated tokens in %.3f s (%.0f tok/s); "
                 "finish_reason=%s\n",
                 sec(t1 - t0).count(), (long long)out.usage.prompt_tokens, c.token_ids.size(), gen,
                 c.token_ids.size() / gen, c.finish_reason.value_or("?").c_str());
  }
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kGenerate, "generate",
                           "generate from a prompt (default: embedded tiny model, greedy)",
                           run_generate);
