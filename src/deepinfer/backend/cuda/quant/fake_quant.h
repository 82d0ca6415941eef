// The rounding deepseek_v41 simulates inside its forward even in plain numerics
// (model/deepseek_v41/ qat.h), on the device: each row of `dim` floats, in place, in blocks; a row
// whose length is not a multiple of the block is left alone (transformers' rule). Bit-identical to
// the CPU quantizers for the same input.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

// FP8 E4M3, blocks of 32, power-of-two scale 2^ceil(log2(max(amax, 1e-4) / 448)) (window KV).
void fake_quant_window_kv(float* x, int64_t rows, int dim, cudaStream_t stream);
// FP4 E2M1 (ties to even), blocks of 16, scale e4m3(max(amax, 6 * 2^-9) / 6) (compressed KV).
void fake_quant_compressed_kv(float* x, int64_t rows, int dim, cudaStream_t stream);
// FP4 E2M1, blocks of 32, power-of-two scale 2^ceil(log2(max(amax, 6 * 2^-126) / 6)) (indexer
// keys and queries).
void fake_quant_indexer(float* x, int64_t rows, int dim, cudaStream_t stream);

}  // namespace deepinfer::cuda
