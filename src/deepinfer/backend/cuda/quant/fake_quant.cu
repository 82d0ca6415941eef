#include <cuda_fp8.h>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/quant/fake_quant.h"

namespace deepinfer::cuda {
namespace {

enum class Kind { kFp8Pow2, kFp4E4m3Scale, kFp4Pow2 };

// ceil(log2(v)) for a positive normal float, exact at powers of two.
__device__ int ceil_log2(float v) {
  int e = 0;
  const float m = frexpf(v, &e);  // v = m * 2^e, m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;
}

__device__ float round_fp8(float x) {
  const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}

// The E2M1 grid {0, .5, 1, 1.5, 2, 3, 4, 6}, nearest, ties to the even code.
__device__ float round_fp4(float v) {
  const float a = fabsf(v);
  float q;
  if (a <= 0.25f)
    q = 0.0f;
  else if (a < 0.75f)
    q = 0.5f;
  else if (a <= 1.25f)
    q = 1.0f;
  else if (a < 1.75f)
    q = 1.5f;
  else if (a <= 2.5f)
    q = 2.0f;
  else if (a < 3.5f)
    q = 3.0f;
  else if (a <= 5.0f)
    q = 4.0f;
  else
    q = 6.0f;
  return copysignf(q, v);
}

// One warp per block of `B` values (B <= 32): lane i holds value i.
template <Kind K, int B>
__global__ void fake_quant_kernel(float* x, int64_t blocks) {
  pdl_grid_begin();
  const int64_t blk = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (blk >= blocks) return;
  float* p = x + blk * B;
  const float v = lane < B ? p[lane] : 0.0f;
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (lane >= B) return;
  float out;
  if constexpr (K == Kind::kFp8Pow2) {
    const int e = ceil_log2(fmaxf(amax, 1e-4f) / 448.0f);
    out = ldexpf(round_fp8(ldexpf(v, -e)), e);
  } else if constexpr (K == Kind::kFp4Pow2) {
    const int e = ceil_log2(fmaxf(amax, 6.0f * 0x1p-126f) / 6.0f);
    out = ldexpf(round_fp4(fminf(fmaxf(ldexpf(v, -e), -6.0f), 6.0f)), e);
  } else {
    const float s = round_fp8(fmaxf(amax, 6.0f * 0x1p-9f) / 6.0f);
    out = round_fp4(fminf(fmaxf(__fdiv_rn(v, s), -6.0f), 6.0f)) * s;
  }
  p[lane] = out;
}

template <Kind K, int B>
void launch(float* x, int64_t rows, int dim, cudaStream_t stream) {
  if (rows <= 0 || dim % B != 0) return;
  const int64_t blocks = rows * (dim / B);
  constexpr int kThreads = 256;
  const int64_t grid = (blocks * 32 + kThreads - 1) / kThreads;
  launch_kernel(fake_quant_kernel<K, B>, static_cast<unsigned>(grid), kThreads, 0, stream, x,
                blocks);
}

}  // namespace

void fake_quant_window_kv(float* x, int64_t rows, int dim, cudaStream_t stream) {
  launch<Kind::kFp8Pow2, 32>(x, rows, dim, stream);
}
void fake_quant_compressed_kv(float* x, int64_t rows, int dim, cudaStream_t stream) {
  launch<Kind::kFp4E4m3Scale, 16>(x, rows, dim, stream);
}
void fake_quant_indexer(float* x, int64_t rows, int dim, cudaStream_t stream) {
  launch<Kind::kFp4Pow2, 32>(x, rows, dim, stream);
}

}  // namespace deepinfer::cuda
