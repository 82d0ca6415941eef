// Random deepseek_v4 models in the real on-disk format (config.json, sharded safetensors with
// the Hub's names, optional FP8 attention + MXFP4 experts, an MTP layer, the tokenizer), for
// tests, benchmarks and the embedded default.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::v4 {

struct TinyModelOptions {
  std::string preset = "default";  // see tiny_model_presets()
  std::string config_path;         // a config.json to use instead of a preset
  uint64_t seed = 0;
  bool quantized = false;             // FP8 128x128-block dense weights, MXFP4 routed experts
  std::string tokenizer_dir;          // copied into the model dir when set
  size_t max_shard_bytes = 8u << 20;  // at least 4 GiB for v4-flash-8layer
  // Called after each manifest tensor is generated (done, total); from worker threads, one at
  // a time, for the parallel preset.
  std::function<void(size_t, size_t)> progress;
};

std::vector<std::string> tiny_model_presets();
// Writes the model into dir (created; existing model files are replaced).
Status write_tiny_model(const std::string& dir, const TinyModelOptions& options);

// The embedded default model: created on first use under $DEEPINFER_CACHE_DIR (else
// $XDG_CACHE_HOME/deepinfer, else ~/.cache/deepinfer) and reused afterwards.
StatusOr<std::string> ensure_default_model(const std::string& tokenizer_dir);

}  // namespace deepinfer::v4
