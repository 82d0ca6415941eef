#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/quant/dequantize.h"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"
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

// row0: the first row's index within the scale grid (a row slice of a larger matrix).
__global__ void fp8_block_kernel(const uint8_t* w, const float* scale, int64_t rows, int64_t cols,
                                 int br, int bc, int64_t scale_cols, int64_t row0,
                                 __nv_bfloat16* out) {
  pdl_grid_begin();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = __float2bfloat16_rn(kFp8[w[i]] * scale[((row0 + r) / br) * scale_cols + c / bc]);
  }
}

// One thread per packed byte: two output elements.
__global__ void mxfp4_kernel(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                             int64_t scale_cols, __nv_bfloat16* out) {
  pdl_grid_begin();
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

// The fast form: one 16-byte load of a row per thread and step, expanded in registers
// (weight_rows.cuh: the same fp32 products as the tables above) and stored as bf16.
template <MatrixFormat F>
__global__ void vector_kernel(DeviceMatrix w, __nv_bfloat16* out) {
  pdl_grid_begin();
  constexpr int P = DeviceMatrix::per_load(F);
  const int64_t per_row = w.cols / P, n = w.rows * per_row;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i % per_row) * P;
    float f[P];
    weight_rows::load<F>(weight_rows::row_of(w, r), c, f);
    auto* o = reinterpret_cast<uint4*>(out + r * w.cols + c);
#pragma unroll
    for (int q = 0; q < P / 8; ++q) {
      uint4 v;
      auto* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        h[j] = __floats2bfloat162_rn(f[8 * q + 2 * j], f[8 * q + 2 * j + 1]);
      o[q] = v;
    }
  }
}

// Whether vector_kernel takes w and out: w read in whole 16-byte loads, out 16-byte aligned.
bool vector_form(const DeviceMatrix& w, const void* out) {
  return w.reads_in_vectors() && reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

}  // namespace

void fp8_block_to_bf16(const uint8_t* w, const float* scale, int64_t rows, int64_t cols,
                       int block_rows, int block_cols, __nv_bfloat16* out, cudaStream_t stream) {
  DeviceMatrix m;
  m.format = MatrixFormat::kFp8Block;
  m.data = w;
  m.block_scale = scale;
  m.rows = rows;
  m.cols = cols;
  m.block_rows = block_rows;
  m.block_cols = block_cols;
  dequantize(m, out, stream);
}

void mxfp4_to_bf16(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                   __nv_bfloat16* out, cudaStream_t stream) {
  DeviceMatrix m;
  m.format = MatrixFormat::kMxfp4;
  m.data = w;
  m.mx_scale = scale;
  m.rows = rows;
  m.cols = cols;
  dequantize(m, out, stream);
}

void prepare_dequantize() { upload_tables_once(); }

void dequantize(const DeviceMatrix& w, __nv_bfloat16* out, cudaStream_t stream) {
  upload_tables_once();
  const int64_t n = w.rows * w.cols;
  if (n == 0) return;
  const auto* data = static_cast<const uint8_t*>(w.data);
  if (w.format != MatrixFormat::kBf16 && vector_form(w, out)) {
    const int64_t vectors = n / DeviceMatrix::per_load(w.format);
    if (w.format == MatrixFormat::kFp8Block)
      launch_kernel(vector_kernel<MatrixFormat::kFp8Block>, grid_for(vectors), 256, 0, stream, w,
                    out);
    else
      launch_kernel(vector_kernel<MatrixFormat::kMxfp4>, grid_for(vectors), 256, 0, stream, w, out);
    return;
  }
  switch (w.format) {
    case MatrixFormat::kBf16:
      DI_CUDA_CHECK(cudaMemcpyAsync(out, data, n * 2, cudaMemcpyDeviceToDevice, stream));
      return;
    case MatrixFormat::kFp8Block:
      launch_kernel(fp8_block_kernel, grid_for(n), 256, 0, stream, data, w.block_scale, w.rows,
                    w.cols, w.block_rows, w.block_cols, (w.cols + w.block_cols - 1) / w.block_cols,
                    w.row0, out);
      break;
    case MatrixFormat::kMxfp4:
      launch_kernel(mxfp4_kernel, grid_for(w.rows * (w.cols / 2)), 256, 0, stream, data, w.mx_scale,
                    w.rows, w.cols, (w.cols + 31) / 32, out);
      break;
  }
}

}  // namespace deepinfer::cuda
