// One interleaved RoPE pair rotated by (cos, sin), shared by every kernel that rotates (rope() and
// the decode compressor's entries). Each product and sum is rounded on its own (no FMA): left to
// the compiler, the two kernels contracted the second line differently, so an entry pooled by a
// decode step and by a verification row parted in the last bit and batch invariance broke. The
// CPU reference (model/deepseek_v4/rope.cc) rounds the same way.
#pragma once

namespace deepinfer::cuda {

__device__ inline void rotate_pair(float* p, float c, float s) {
  const float x0 = p[0], x1 = p[1];
  p[0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  p[1] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

}  // namespace deepinfer::cuda
