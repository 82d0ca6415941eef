// Quantization the official reference simulates inside its forward pass (spec §4): round
// activations through FP8/FP4 with power-of-two block scales, and the indexer's Hadamard rotation.
#pragma once

#include <cstdint>

namespace deepinfer {

// In place over a contiguous row of n floats, in blocks of `block` elements (the last block may
// be shorter). Per block: s = 2^ceil(log2(max(amax, 1e-4) / 448)); x = fp8e4m3(x / s) * s.
void fake_quant_fp8_blocks(float* x, int64_t n, int block);

// Per block: s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)); x = e2m1(clamp(x / s, -6, 6)) * s,
// rounding to the E2M1 grid with ties to even.
void fake_quant_fp4_blocks(float* x, int64_t n, int block);

// In place, normalized Walsh-Hadamard transform in Sylvester order: x <- H_n x * n^-1/2.
// n must be a power of two. Sums are fp32, butterflies in the order of the fast transform.
void hadamard_transform(float* x, int n);

// ceil(log2(v)) for a positive finite float, exact (no libm rounding at powers of two).
int ceil_log2(float v);

}  // namespace deepinfer
