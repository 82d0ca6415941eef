// The quantization V4.1 simulates inside its forward even in fp32 (transformers' deepseek_v41 at
// 0a2080b4, golden_v41/README.md surprise 2): stored KV and indexer operands are rounded through
// FP8/FP4 and back. Each quantizer leaves a row unchanged when its length is not a multiple of the
// block, as transformers does for shapes the reference cannot block.
#pragma once

#include <cstdint>

namespace deepinfer::v41 {

// Window KV after RoPE: FP8 E4M3, blocks of 32 over all dims (RoPE tail included), power-of-two
// scale 2^ceil(log2(max(amax, 1e-4) / 448)).
void quantize_window_kv(float* x, int64_t n);

// Compressed KV after RoPE: FP4 E2M1 (ties to even), blocks of 16, scale = e4m3(max(amax, 6 *
// 2^-9) / 6) (not a power of two: x / s and q * s round in fp32).
void quantize_compressed_kv(float* x, int64_t n);

// Indexer keys and queries after RoPE: FP4 E2M1, blocks of 32, power-of-two scale
// 2^ceil(log2(max(amax, 6 * 2^-126) / 6)).
void quantize_indexer(float* x, int64_t n);

}  // namespace deepinfer::v41
