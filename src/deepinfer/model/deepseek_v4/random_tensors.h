// Random weights stored the way real checkpoints store them (BF16, F32, FP8 E4M3 with E8M0 block
// scales, MXFP4), shared by the tiny-model writers of both families (deepseek_v4/tiny_model.cc,
// deepseek_v41/tiny_model.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/safetensors_writer.h"

namespace deepinfer::v4 {

std::vector<uint8_t> as_bytes(const void* p, size_t n);
std::vector<uint8_t> to_bf16(const std::vector<float>& v);
bool ends_with(const std::string& s, const char* suffix);
// A quantized weight's scale tensor: "<base>.scale" for "<base>.weight".
std::string scale_name(const std::string& weight_name);
// A stored tensor as a streamed writer plans it (its bytes from dtype and shape).
PlannedTensor planned_tensor(std::string name, DType dtype, std::vector<int64_t> shape);

// How large a random tensor's values are, by its role (see random_values).
struct ValueMoments {
  float mean = 0, stddev = 1;
};
ValueMoments value_moments(const std::string& name, const std::vector<int64_t>& shape);

// numel values drawn from `normal`, of a size that suits the tensor's role by name: norms and
// `_scale` gains near 1, biases, `_base` and `ape` of order 0.3-0.5, matrices ~1/sqrt(fan_in),
// the embedding and other vectors of order 1.
std::vector<float> random_values(const std::string& name, const std::vector<int64_t>& shape,
                                 std::mt19937_64& rng, std::normal_distribution<float>& normal);

// `name` ends in ".weight"; adds it as F8_E4M3 [rows, cols] and "<base>.scale" as E8M0 per
// br x bc block (power-of-two scales mapping each block's amax to at most 448).
void add_fp8(std::vector<TensorRecord>& out, const std::string& name, const std::vector<float>& v,
             int64_t rows, int64_t cols, int br, int bc);
// float_to_fp4e2m1 (tensor/dtype.h) for finite x without its loop: one comparison per midpoint,
// each tie going to the even code as there. Equal for every finite input, so the small presets
// keep their bytes; inline and about 10x faster, which the full preset's 277 billion expert
// values need.
inline uint8_t fp4_code(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const float a = std::fabs(x);
  const int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                   (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>(((bits >> 28) & 0x8) | code);  // the sign bit, -0 included
}
// Packed MXFP4 [rows, cols / 2] (low nibble first) + E8M0 scales per 32 along cols.
void add_mxfp4(std::vector<TensorRecord>& out, const std::string& name, const std::vector<float>& v,
               int64_t rows, int64_t cols);

}  // namespace deepinfer::v4

namespace deepinfer::v4 {

// Fills records[i] for i < count with make(i, rng, normal). Serial: one stream seeded `seed`,
// in order (the distribution keeps a spare value across tensors). Parallel: one stream per
// tensor (a serial stream would take minutes for the real dims' tens of billions of values).
// progress(done, count) is called after each, one call at a time.
using MakeTensor =
    std::function<void(size_t i, std::mt19937_64& rng, std::normal_distribution<float>& normal)>;
void generate_tensors(size_t count, bool parallel, uint64_t seed,
                      const std::function<void(size_t, size_t)>& progress, const MakeTensor& make);

// Writes a model directory: dir created, old safetensors and index removed, `tensors` in shards
// of at most max_shard_bytes (Hub names, {"format": "pt"}), config.json, and tokenizer.json +
// tokenizer_config.json copied from tokenizer_dir when it is set.
Status write_model_dir(const std::string& dir, std::vector<TensorRecord> tensors,
                       size_t max_shard_bytes, const std::string& config_json,
                       const std::string& tokenizer_dir);
// write_model_dir's steps around the tensors, for writers that stream them: dir created with
// the old safetensors and index removed; then config.json and the tokenizer files.
Status prepare_model_dir(const std::string& dir);
Status finish_model_dir(const std::string& dir, const std::string& config_json,
                        const std::string& tokenizer_dir);
// resource_exhausted, before anything is deleted or written, when dir's file system (counting
// the safetensors a write would replace) has less room than `needed` bytes plus a margin.
Status check_model_room(const std::string& dir, uint64_t needed);

}  // namespace deepinfer::v4
