// One interleaved RoPE pair rotated by (cos, sin), shared by every kernel that rotates (rope() and
// the decode compressor's entries). Each product and sum is rounded on its own (no FMA): left to
// the compiler, the two kernels contracted the second line differently, so an entry pooled by a
// decode step and by a verification row parted in the last bit and batch invariance broke. The
// CPU reference (model/deepseek_v4/rope.cc) rounds the same way.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

// The rotation of pair k at position pos: the angle pos * inv_freq[k] in fp64 (as the CPU
// reference), its cosine and sine rounded to fp32; inverse: the conjugate.
__device__ inline void rope_cos_sin(int64_t pos, double inv_freq, bool inverse, float* c,
                                    float* s) {
  const double a = static_cast<double>(pos) * inv_freq;
  *c = static_cast<float>(cos(a));
  *s = static_cast<float>(inverse ? -sin(a) : sin(a));
}

__device__ inline void rotate_pair(float* p, float c, float s) {
  const float x0 = p[0], x1 = p[1];
  p[0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  p[1] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

}  // namespace deepinfer::cuda
