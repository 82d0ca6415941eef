// Random deepseek_v4 models in the real on-disk format (config.json, sharded safetensors with
// the Hub's names, optional FP8 attention + MXFP4 experts, an MTP layer, the tokenizer), for
// tests, benchmarks and the embedded default.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/streaming_shard_writer.h"

namespace deepinfer::v4 {

struct TinyModelOptions {
  std::string preset = "default";  // see tiny_model_presets()
  std::string config_path;         // a config.json to use instead of a preset
  uint64_t seed = 0;
  bool quantized = false;             // FP8 128x128-block dense weights, MXFP4 routed experts
  std::string tokenizer_dir;          // copied into the model dir when set
  size_t max_shard_bytes = 8u << 20;  // at least 4 GiB for the v4-flash presets
  // Streamed: each tensor made from (seed, name, shape) alone, in parallel, and written shard
  // by shard holding at most two shards in memory. The v4-flash presets always stream (they do
  // not fit in memory); the others keep their one serial random stream unless this is set.
  bool streamed = false;
  // In memory: called after each manifest tensor is generated (done, total), one call at a time.
  std::function<void(size_t, size_t)> progress;
  // Streamed: called after each shard is written, one call at a time.
  std::function<void(const StreamingWriteProgress&)> stream_progress;
};

std::vector<std::string> tiny_model_presets();
// Writes the model into dir (created; existing model files are replaced). resource_exhausted,
// before anything is written, when dir's file system has less room than the model needs.
Status write_tiny_model(const std::string& dir, const TinyModelOptions& options);

// What write_tiny_model would write, from the config alone (make-tiny-model --dry-run).
struct TinyModelPlan {
  std::string config_json;
  bool streamed = false;
  size_t tensors = 0;  // stored tensors, scales included
  uint64_t total_bytes = 0;
  size_t shards = 0;
  size_t max_shard_bytes = 0;
};
StatusOr<TinyModelPlan> plan_tiny_model(const TinyModelOptions& options);

// The embedded default model: created on first use under $DEEPINFER_CACHE_DIR (else
// $XDG_CACHE_HOME/deepinfer, else ~/.cache/deepinfer) and reused afterwards.
StatusOr<std::string> ensure_default_model(const std::string& tokenizer_dir);

}  // namespace deepinfer::v4
