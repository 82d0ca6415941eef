// A row norm, then interleaved partial RoPE (rope.h) of each row's last rope_dim values, for up
// to two sets of rows in one launch: the attention's q heads and its kv row (V4: q's per-head
// norm and kv's weighted norm; V4.1: kv's norm, q rotated only). Decode launched four kernels
// for this a layer. Each set's values are the bits of its separate ops: rms_norm_rows or
// rms_norm (the same device code), then rope.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

enum class RowNorm {
  kNone,      // RoPE only
  kPerWarp,   // rms_norm_rows' form: unweighted, a warp a row
  kPerBlock,  // rms_norm's form: `weight` (or none), a block a row
};

struct NormRopeRows {
  float* x = nullptr;  // [rows, d], rewritten in place
  int64_t rows = 0;
  int rows_per_pos = 1;  // row r is at positions[r / rows_per_pos]
  RowNorm norm = RowNorm::kNone;
  const float* weight = nullptr;  // kPerBlock's
};

// Both sets share d, rope_dim, positions, inv_freq and eps; a set of 0 rows is skipped.
void norm_rope(const NormRopeRows& a, const NormRopeRows& b, int64_t d, int rope_dim,
               const int64_t* positions, const double* inv_freq, float eps, cudaStream_t stream);

}  // namespace deepinfer::cuda
