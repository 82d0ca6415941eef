// deepinfer make-tiny-model: write a random deepseek_v4 or deepseek_v41 model in the real on-disk
// format (the preset's or the --config's model_type picks the family).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model.h"
#include "deepinfer/model/model_family.h"

namespace {

using deepinfer::ModelFamily;

deepinfer::StatusOr<ModelFamily> family_of(const deepinfer::v4::TinyModelOptions& o) {
  if (o.config_path.empty())
    return deepinfer::v41::is_tiny_model_preset(o.preset) ? ModelFamily::kDeepseekV41
                                                          : ModelFamily::kDeepseekV4;
  std::ifstream f(o.config_path);
  if (!f) return deepinfer::not_found(o.config_path + ": cannot open config");
  std::stringstream text;
  text << f.rdbuf();
  return deepinfer::model_family_from_config_json(text.str(), o.config_path);
}

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

// --dry-run: what would be written, from the config alone.
int print_plan(const deepinfer::v4::TinyModelOptions& o) {
  auto plan = deepinfer::v4::plan_tiny_model(o);
  if (!plan.ok()) {
    std::cerr << "deepinfer make-tiny-model: " << plan.status().to_string() << "\n";
    return 1;
  }
  std::printf(
      "%s: %zu tensors, %llu bytes (%.2f GiB, %.1f GB) in %zu shards of at most %.2f GiB, %s\n",
      o.config_path.empty() ? ("preset " + o.preset).c_str() : o.config_path.c_str(), plan->tensors,
      static_cast<unsigned long long>(plan->total_bytes), gib(plan->total_bytes),
      plan->total_bytes / 1e9, plan->shards, gib(plan->max_shard_bytes),
      plan->streamed ? "streamed (name-seeded, parallel, two shards held at most)"
                     : "in memory (one serial random stream)");
  return 0;
}

// A line per shard written: the big presets take many minutes.
void print_progress(const deepinfer::StreamingWriteProgress& p) {
  const double rate = p.seconds > 0 ? p.bytes_written / p.seconds : 0;
  const double eta = rate > 0 ? (p.total_bytes - p.bytes_written) / rate : 0;
  std::fprintf(stderr,
               "shard %zu/%zu: %zu/%zu tensors, %.1f/%.1f GiB, %.0f MB/s, %.0f s elapsed, "
               "%.0f s left, held at most %zu shards (%.1f GiB)\n",
               p.shards_written, p.shards, p.tensors_written, p.tensors, gib(p.bytes_written),
               gib(p.total_bytes), rate / 1e6, p.seconds, eta, p.max_shards_held,
               gib(p.max_bytes_held));
}

int run_make_tiny_model(int argc, char** argv) {
  deepinfer::v4::TinyModelOptions o;
  std::string dir, presets;
  for (const auto& p : deepinfer::v4::tiny_model_presets())
    presets += (presets.empty() ? "" : ", ") + p;
  for (const auto& p : deepinfer::v41::tiny_model_presets()) presets += ", " + p;
  CLI::App app{
      "Write a random deepseek_v4 or deepseek_v41 model (config.json, sharded safetensors with "
      "the Hub's names, the bundled tokenizer; V4 presets have an MTP layer)",
      "deepinfer make-tiny-model"};
  app.add_option("DIR", dir, "output directory (not needed with --dry-run)");
  app.add_option(
         "--preset", o.preset,
         "layer schedule: " + presets +
             ". v4-flash-8layer: V4-Flash's real dims and its first 8 layers, FP8 + MXFP4, about "
             "34 GB (32 GiB), 4 GiB shards. v4-flash-full: all 43 layers (spec §2.1 schedule, "
             "MTP), about "
             "149 GiB (160 GB) on disk: it needs that much free space, e.g. the nvidia-h200-x4 or "
             "-x8 machines (235 GiB disk), not the single-GPU one (64 GiB) nor -x2's disk (128 "
             "GiB; its /dev/shm may do: docs/v4_flash_full_model.md); "
             "it checks before writing. Both stream: each tensor is made from (seed, name, "
             "shape) alone on every core and written shard by shard (two 4 GiB shards in memory "
             "at most), so both share embed, head and layers 0-7 bit for bit for one seed. "
             "v41-default: a tiny V4.1 model with every layer role (KV "
             "sources of ratio 2 and 1 with consumers, index reuse and re-index, the candidate "
             "source, two Engram layers). v41-flash-8layer: V4.1-Flash's real dims on that "
             "schedule in 8 layers, FP8 32x32 + MXFP4, about 60 GB; its Engram tables are shrunk "
             "100x (engram_vocab_size 160000 instead of 16000000: ~3.84M rows of 256 per table, "
             "~1 GB FP8, instead of ~384M rows, ~98 GB), streamed as the v4-flash presets are")
      ->capture_default_str();
  app.add_option("--config", o.config_path,
                 "use this config.json instead of a preset (its model_type picks the family)");
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  app.add_flag("--quantized", o.quantized,
               "FP8 dense weights (V4: 128x128 blocks, V4.1: 32x32; E8M0 scales) and MXFP4 "
               "routed experts");
  app.add_flag("--streamed", o.streamed,
               "make each tensor from (seed, name, shape) in parallel and write shard by shard "
               "(always on for the v4-flash presets and v41-flash-8layer; other presets then get "
               "other values)");
  size_t shard_mib = o.max_shard_bytes >> 20;
  app.add_option("--shard-size-mib", shard_mib,
                 "largest shard in MiB (the v4-flash presets: at least 4096); streamed writes "
                 "make one shard's tensors in parallel, so large models want large shards")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  bool dry_run = false;
  app.add_flag("--dry-run", dry_run,
               "V4: print the tensor count, bytes and shard count without writing anything");
  app.add_option("--tokenizer", o.tokenizer_dir, "tokenizer directory to copy (default: bundled)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.max_shard_bytes = shard_mib << 20;
  deepinfer::StatusOr<ModelFamily> family = family_of(o);
  if (family.ok() && *family == ModelFamily::kDeepseekV41 && dry_run) {
    std::cerr << "deepinfer make-tiny-model: --dry-run is for deepseek_v4 models\n";
    return 1;
  }
  if (family.ok() && dry_run) return print_plan(o);
  if (dir.empty()) {
    std::cerr << "deepinfer make-tiny-model: DIR is required (except with --dry-run)\n";
    return 1;
  }
  if (o.tokenizer_dir.empty()) o.tokenizer_dir = deepinfer::cli::bundled_tokenizer_dir();
  o.stream_progress = print_progress;
  // Progress on long work: a line per tenth of the tensors (the big presets take minutes).
  size_t last_tenth = 0;
  o.progress = [&](size_t done, size_t total) {
    const size_t tenth = done * 10 / total;
    if (total >= 100 && tenth > last_tenth) {
      last_tenth = tenth;
      std::cerr << "generated " << done << "/" << total << " tensors\n";
    }
  };
  deepinfer::Status st = family.status();
  if (st.ok())
    st = *family == ModelFamily::kDeepseekV41 ? deepinfer::v41::write_tiny_model(dir, o)
                                              : deepinfer::v4::write_tiny_model(dir, o);
  if (!st.ok()) {
    std::cerr << "deepinfer make-tiny-model: " << st.to_string() << "\n";
    return 1;
  }
  const bool big = o.preset.find("-flash-") != std::string::npos;
  std::cerr << "wrote " << (o.config_path.empty() ? "preset " + o.preset : o.config_path)
            << (o.quantized || big ? " (FP8 + MXFP4)" : " (BF16)") << " model to " << dir << "\n";
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kMakeTinyModel, "make-tiny-model",
                           "write a random deepseek_v4 or deepseek_v41 model in the real "
                           "checkpoint format",
                           run_make_tiny_model);
