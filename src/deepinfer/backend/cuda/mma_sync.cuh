// Warp-level tensor-core pieces shared by kernels (SM80+ mma.sync, valid on SM90): bf16
// m16n8k16 and tf32 m16n8k8 with fp32 accumulation, and ldmatrix loads of bf16 fragments from
// shared memory.
//
// Fragment layout (g = lane / 4, t = lane % 4): A (16x16, row-major) a0 = rows g, k 2t..2t+1;
// a1 = rows g + 8, same k; a2, a3 = the same rows at k + 8. B (16x8, "col": element (k, n) read
// along k) b0 = k 2t..2t+1 of column g, b1 = k + 8. C/D (16x8) c0, c1 = row g, columns 2t, 2t+1;
// c2, c3 = row g + 8.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace deepinfer::cuda {

__device__ inline uint32_t shared_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without a register round trip (both 16-byte aligned); the copies
// are in flight together until cp_async_wait_all. valid false: zeros, nothing read.
__device__ inline void cp_async16(void* dst, const void* src, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Groups of cp.async copies: commit closes the copies issued since the last commit into a group;
// wait returns once at most N groups are still in flight (a pipeline's stages).
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// c += a * b (bf16 inputs, fp32 accumulators).
__device__ inline void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                      uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 b16 matrices: lanes 8i..8i+7 give the 16-byte rows of matrix i; r[i] receives, in
// lane l, row l / 4's elements 2(l % 4), 2(l % 4) + 1 of matrix i.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_addr(row)));
}

// The same, each matrix transposed: lane l receives elements (2(l % 4), l / 4) and
// (2(l % 4) + 1, l / 4), which is a B fragment of a matrix stored with k along its rows.
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_addr(row)));
}

// tf32 m16n8k8 (fp32 accumulators). A (16x8, row) a0 = (g, t), a1 = (g + 8, t), a2 = (g, t + 4),
// a3 = (g + 8, t + 4); B (8x8, col) b0 = (k t, n g), b1 = (k t + 4, n g); C as above.
__device__ inline void mma_tf32_1688(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                     uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x as big + small, both tf32 (round to nearest): big * y + small * y' + big * y'' carries about
// 22 of fp32's 24 mantissa bits (the "3xTF32" product), at three mma instead of one.
struct Tf32Pair {
  uint32_t big, small;
};
__device__ inline uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ inline Tf32Pair split_tf32(float x) {
  const uint32_t big = to_tf32(x);
  return {big, to_tf32(x - __uint_as_float(big))};
}

__device__ inline uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Rows of x staged in shared memory in a k map's fragment order, 128 k a chunk, for the GEMV
// forms (gemm/fp8_gemv_mma.cu, moe/grouped_experts_w4_gemv.cu, weights as the mma's A): the 16
// bytes thread t (lane % 4) reads for mma steps 2q and 2q + 1 of chunk c sit at
// staged_offset(c, q, t) of the row. Rows are staged_row_bytes apart, 64 bytes more than their
// chunks, so rows g and g + 1 of a 16-byte load phase fall on different banks.
__host__ __device__ inline int staged_offset(int c, int q, int t) {
  return c * 256 + q * 64 + t * 16;
}
__host__ __device__ inline int64_t staged_row_bytes(int64_t cols) { return cols / 128 * 256 + 64; }

// Two bf16x2 words' elementwise product (bf16 subnormal inputs kept: the expansions of E2M1 and
// E4M3 bits that read as value times a power of two rely on it).
__device__ inline uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                   *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

}  // namespace deepinfer::cuda
