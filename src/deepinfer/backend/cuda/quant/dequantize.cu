#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/quant/dequantize.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::cuda {
namespace {

// Decode tables filled from the host's own decoders (tensor/dtype.h), so the device can't
// disagree with the CPU on any code.
__constant__ float kFp8[256];
__constant__ float kE8m0[256];
__constant__ float kFp4[16];

void upload_tables_once() {
  static const bool done = [] {
    float fp8[256], e8m0[256], fp4[16];
    for (int i = 0; i < 256; ++i) {
      fp8[i] = fp8e4m3_to_float(static_cast<uint8_t>(i));
      e8m0[i] = e8m0_to_float(static_cast<uint8_t>(i));
    }
    for (int i = 0; i < 16; ++i) fp4[i] = fp4e2m1_to_float(static_cast<uint8_t>(i));
    DI_CUDA_CHECK(cudaMemcpyToSymbol(kFp8, fp8, sizeof(fp8)));
    DI_CUDA_CHECK(cudaMemcpyToSymbol(kE8m0, e8m0, sizeof(e8m0)));
    DI_CUDA_CHECK(cudaMemcpyToSymbol(kFp4, fp4, sizeof(fp4)));
    return true;
  }();
  (void)done;
}

__global__ void fp8_block_kernel(const uint8_t* w, const float* scale, int64_t rows, int64_t cols,
                                 int br, int bc, int64_t scale_cols, __nv_bfloat16* out) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = __float2bfloat16_rn(kFp8[w[i]] * scale[(r / br) * scale_cols + c / bc]);
  }
}

// One thread per packed byte: two output elements.
__global__ void mxfp4_kernel(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                             int64_t scale_cols, __nv_bfloat16* out) {
  const int64_t half = cols / 2, n = rows * half;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / half, c = 2 * (i % half);
    const float s = kE8m0[scale[r * scale_cols + c / 32]];
    const uint8_t b = w[i];
    out[r * cols + c] = __float2bfloat16_rn(kFp4[b & 0xf] * s);
    out[r * cols + c + 1] = __float2bfloat16_rn(kFp4[b >> 4] * s);
  }
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

}  // namespace

void fp8_block_to_bf16(const uint8_t* w, const float* scale, int64_t rows, int64_t cols,
                       int block_rows, int block_cols, __nv_bfloat16* out, cudaStream_t stream) {
  upload_tables_once();
  const int64_t n = rows * cols;
  if (n == 0) return;
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  fp8_block_kernel<<<grid_for(n), 256, 0, stream>>>(w, scale, rows, cols, block_rows, block_cols,
                                                    scale_cols, out);
  DI_CUDA_CHECK(cudaGetLastError());
}

void mxfp4_to_bf16(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                   __nv_bfloat16* out, cudaStream_t stream) {
  upload_tables_once();
  const int64_t n = rows * (cols / 2);
  if (n == 0) return;
  mxfp4_kernel<<<grid_for(n), 256, 0, stream>>>(w, scale, rows, cols, (cols + 31) / 32, out);
  DI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace deepinfer::cuda
