// Random deepseek_v41 (DeepSeek-V4.1-Flash) models in the released checkpoint's on-disk format:
// the composite config.json (model fields under text_config, quantization_config at the top),
// safetensors with the Hub-style names weights.h expects, and the tokenizer the Engram layers
// need. For tests (v41-default, v41-dspark) and benchmarks (v41-flash-8layer).
#pragma once

#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"  // v4::TinyModelOptions

namespace deepinfer::v41 {

// v41-default: tiny dims (hidden 64, 7 layers: sliding, sliding + Engram, a ratio-2 KV source
// and its consumer (index reuse), a ratio-1 KV source that is also the candidate source and an
// Engram layer, a reuse layer, and an index source inside the candidate blocks), BF16 weights
// (FP8 32x32 + MXFP4 with --quantized), vocab = the tokenizer's ids so every id has an Engram
// entry.
// v41-dspark: v41-default plus three DSpark draft stages (mtp.0-2, as released: taps from layers
// 3, 5 and 6, blocks of 5, 4 experts top-2, Markov rank 8) and their tensors.
// v41-flash-8layer: V4.1-Flash's real dims (spec §11.1) on the same 8-layer schedule shape
// ([0,0,2,2,1,1,1,1], KV sources 2 and 4, index sources 2/4/6, candidate source 4, Engram
// layers 1 and 4), FP8 32x32 dense, MXFP4 experts, FP8 Engram tables with E8M0 scales per 32
// channels. The Engram tables are shrunk 100x by engram_vocab_size 160,000 instead of
// 16,000,000 (the hash still has N = 4, 8 heads, 24 columns of 256 dims; each table has ~3.84M
// rows, ~1 GB, instead of ~384M rows, ~98 GB). About 60 GB on disk, streamed as v4's flash
// presets are (each tensor from (seed, name, shape), written shard by shard, the disk's room
// checked first); --streamed does the same for the small presets, with other values.
std::vector<std::string> tiny_model_presets();
bool is_tiny_model_preset(const std::string& name);

// A preset's config.json (with the tokenizer's Engram sizes), without writing any tensor.
StatusOr<std::string> tiny_model_config_json(const std::string& preset,
                                             const std::string& tokenizer_dir);

// Writes the model into dir (created; existing model files are replaced). options.preset is one
// of tiny_model_presets(), or options.config_path a deepseek_v41 config.json. A preset with
// Engram layers needs options.tokenizer_dir (its engram_compressed_vocab_size and the tables'
// rows come from that tokenizer). resource_exhausted, before anything is written, when a
// streamed model does not fit dir's file system.
Status write_tiny_model(const std::string& dir, const v4::TinyModelOptions& options);

}  // namespace deepinfer::v41
