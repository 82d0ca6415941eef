// deepinfer make-tiny-model: write a random deepseek_v4 model in the real on-disk format.
#include <CLI/CLI.hpp>
#include <iostream>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"

namespace {

int run_make_tiny_model(int argc, char** argv) {
  deepinfer::v4::TinyModelOptions o;
  std::string dir, presets;
  for (const auto& p : deepinfer::v4::tiny_model_presets())
    presets += (presets.empty() ? "" : ", ") + p;
  CLI::App app{
      "Write a random deepseek_v4 model (config.json, sharded safetensors with the Hub's "
      "names, an MTP layer, the bundled tokenizer)",
      "deepinfer make-tiny-model"};
  app.add_option("DIR", dir, "output directory")->required();
  app.add_option("--preset", o.preset,
                 "layer schedule: " + presets +
                     " (v4-flash-8layer: V4-Flash's real dims and first 8 layers, FP8 + MXFP4, "
                     "about 30 GB, 4 GiB shards)")
      ->capture_default_str();
  app.add_option("--config", o.config_path, "use this config.json instead of a preset");
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  app.add_flag("--quantized", o.quantized,
               "FP8 (128x128 blocks, E8M0 scales) dense weights and MXFP4 routed experts");
  app.add_option("--tokenizer", o.tokenizer_dir, "tokenizer directory to copy (default: bundled)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.tokenizer_dir.empty()) o.tokenizer_dir = deepinfer::cli::bundled_tokenizer_dir();
  // Progress on long work: a line per tenth of the tensors (the big preset takes minutes).
  size_t last_tenth = 0;
  o.progress = [&](size_t done, size_t total) {
    const size_t tenth = done * 10 / total;
    if (total >= 100 && tenth > last_tenth) {
      last_tenth = tenth;
      std::cerr << "generated " << done << "/" << total << " tensors\n";
    }
  };
  deepinfer::Status st = deepinfer::v4::write_tiny_model(dir, o);
  if (!st.ok()) {
    std::cerr << "deepinfer make-tiny-model: " << st.to_string() << "\n";
    return 1;
  }
  std::cerr << "wrote " << (o.config_path.empty() ? "preset " + o.preset : o.config_path)
            << (o.quantized || o.preset == "v4-flash-8layer" ? " (FP8 + MXFP4)" : " (BF16)")
            << " model to " << dir << "\n";
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kMakeTinyModel, "make-tiny-model",
                           "write a random deepseek_v4 model in the real checkpoint format",
                           run_make_tiny_model);
