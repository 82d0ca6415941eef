// Interleaved partial RoPE (spec §5): in each row, pairs (x[2i], x[2i+1]) of the rope_dim values
// starting at `x` rotate by pos * inv_freq[i] (angles in fp64, as the CPU reference). Row r
// belongs to position positions[r / rows_per_pos]. inverse: the conjugate angle (de-rotation).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

void rope(float* x, int64_t rows, int64_t row_stride, int rope_dim, int rows_per_pos,
          const int64_t* positions, const double* inv_freq, bool inverse, cudaStream_t stream);

}  // namespace deepinfer::cuda
