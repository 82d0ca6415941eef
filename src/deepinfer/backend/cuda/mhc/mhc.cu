#include <type_traits>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/norm/rms_norm_row.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHc = 8;
constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

constexpr int kSliceThreads = 128;
constexpr int kSliceWarps = kSliceThreads / 32;
constexpr int kSlice = 512;  // values of a token's streams per partial block
// Tokens a block (each fn value loaded serves them all) and mixes a thread accumulates a pass:
// a lane's kTokens * (32 / kTokens) sums are reduced 32 at a time. Few tokens take 4 (8 mixes a
// pass: decode's short chain of passes); larger batches take 8 or 16, which cut fn's slices
// reread from L2 (a 4k prefill read 48 KB of fn for every 4 tokens and slice, 1.6 GB a site).
// The butterfly adds every sum's 32 lanes in the same tree whatever the grouping, so a token's
// bits do not depend on it.
#ifndef MHC_PARTIALS_8_FROM
#define MHC_PARTIALS_8_FROM 64
#endif
#ifndef MHC_PARTIALS_16_FROM
#define MHC_PARTIALS_16_FROM 512
#endif

__host__ __device__ inline int64_t slices(int64_t n) { return (n + kSlice - 1) / kSlice; }

// Block (s, b): over values [s * kSlice, (s + 1) * kSlice) of the streams X (n values) of tokens
// t = b * kTokens + u, part[t][s][r] = fn[r] . X_t for r < rows, and part[t][s][rows] =
// X_t . X_t. fn's slice is read once for the block's tokens (prefill re-read it per token from
// L2, gigabytes per layer); each token's sums have the order they have alone. Each thread takes
// 4 adjacent values (a float4 of X and of each fn row) and fetches the next pass's fn words
// before it sums the current ones: one load round per pass, where a strided walk took 12
// dependent rounds a site (B=1 2.82 -> 2.73 ms a step on an H100, docs/gpu_pdl/). A thread sums
// its 4 values, then the warp's butterfly, then the warps in order. Where n % 4 != 0 (rows not
// 16-byte aligned) or past n, the values load one at a time.
__device__ inline float4 load_quad(const float* row, int64_t i, int64_t n) {
  if (n % 4 == 0 && i + 3 < n) return *reinterpret_cast<const float4*>(row + i);
  return make_float4(i < n ? row[i] : 0.f, i + 1 < n ? row[i + 1] : 0.f,
                     i + 2 < n ? row[i + 2] : 0.f, i + 3 < n ? row[i + 3] : 0.f);
}

template <int kTokens>
__global__ void __launch_bounds__(kSliceThreads)
    mix_partials_kernel(const float* fn, const float* Xall, int64_t n, int64_t tokens, int rows,
                        float* part) {
  pdl_grid_begin();
  constexpr int kAcc = 32 / kTokens;
  __shared__ float wsum[kSliceWarps][kTokens][kMaxMix + 1];
  const int64_t s = blockIdx.x, S = gridDim.x, t0 = int64_t{blockIdx.y} * kTokens;
  const int tn = tokens - t0 < kTokens ? static_cast<int>(tokens - t0) : kTokens;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t i = s * kSlice + 4 * int64_t{threadIdx.x};
  const bool live = i < n;
  float4 x[kTokens];
#pragma unroll
  for (int u = 0; u < kTokens; ++u) {
    x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (live && u < tn) x[u] = load_quad(Xall + (t0 + u) * n, i, n);
  }
  const auto fetch = [&](int r0, float4(&f)[kAcc]) {
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
      f[j] = live && r0 + j < rows ? load_quad(fn + (r0 + j) * n, i, n)
                                   : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  float4 next[kAcc];
  fetch(0, next);
#pragma unroll
  for (int u = 0; u < kTokens; ++u) {
    float ss = x[u].x * x[u].x;
    ss = fmaf(x[u].y, x[u].y, ss);
    ss = fmaf(x[u].z, x[u].z, ss);
    ss = fmaf(x[u].w, x[u].w, ss);
    ss = warp_reduce(ss, SumOp{});
    if (lane == 0 && u < tn) wsum[warp][u][rows] = ss;
  }
  for (int r0 = 0; r0 < rows; r0 += kAcc) {
    float4 f[kAcc];
#pragma unroll
    for (int j = 0; j < kAcc; ++j) f[j] = next[j];
    if (r0 + kAcc < rows) fetch(r0 + kAcc, next);
    float acc[kTokens * kAcc];  // token u, mix r0 + j at u * kAcc + j
#pragma unroll
    for (int u = 0; u < kTokens; ++u)
#pragma unroll
      for (int j = 0; j < kAcc; ++j) {
        float v = f[j].x * x[u].x;
        v = fmaf(f[j].y, x[u].y, v);
        v = fmaf(f[j].z, x[u].z, v);
        acc[u * kAcc + j] = fmaf(f[j].w, x[u].w, v);
      }
    const float v = warp_transpose_sum(acc);
    const int u = lane / kAcc, j = lane % kAcc;
    if (u < tn && r0 + j < rows) wsum[warp][u][r0 + j] = v;
  }
  __syncthreads();
  for (int u = 0; u < tn; ++u) {  // the warps' sums added in warp order
    float* out = part + ((t0 + u) * S + s) * (rows + 1);
    for (int r = threadIdx.x; r <= rows; r += kSliceThreads) {
      float v = 0;
      for (int w = 0; w < kSliceWarps; ++w) v += wsum[w][u][r];
      out[r] = v;
    }
  }
}
static_assert(4 * kSliceThreads == kSlice, "mix_partials_kernel: a thread per 4 values of a slice");

void launch_partials(const HcArgs& a, const float* X, int rows, cudaStream_t stream) {
  if (!a.partials) {
    std::fprintf(stderr, "mhc: HcArgs::partials is null\n");
    std::abort();
  }
  const int64_t n = a.hc * a.hidden;
  const auto go = [&](auto tokens_tag) {  // the grid follows the kernel's tokens a block
    constexpr int kTokens = decltype(tokens_tag)::value;
    const dim3 grid(static_cast<unsigned>(slices(n)),
                    static_cast<unsigned>((a.tokens + kTokens - 1) / kTokens));
    launch_kernel(mix_partials_kernel<kTokens>, grid, kSliceThreads, 0, stream, a.fn, X, n,
                  a.tokens, rows, a.partials);
  };
  const bool eight = a.tokens >= MHC_PARTIALS_8_FROM;  // 16 only where 8 applies too
  if (eight && a.tokens >= MHC_PARTIALS_16_FROM)
    go(std::integral_constant<int, 16>{});
  else if (eight)
    go(std::integral_constant<int, 8>{});
  else
    go(std::integral_constant<int, 4>{});
}

// The partial sums a token's mixes read, staged in shared memory by the whole block first: the
// sums below then walk shared memory instead of S dependent global loads each (decode's latency).
constexpr int kMaxStaged = 64 * (kMaxMix + 1);
static_assert(kThreads > kMaxMix, "mixes: a thread per mix and one for the sum of squares");

// m[r] = fn[r] . (X * rsqrt(mean(X^2) + eps)) for token blockIdx.x from its partial sums (the
// norm factor is a scalar, so it multiplies the raw dot products), summed in slice order.
__device__ void mixes(const HcArgs& a, int rows, float* m) {
  __shared__ float inv;
  __shared__ float staged[kMaxStaged];
  const int64_t n = a.hc * a.hidden, S = slices(n), t = blockIdx.x;
  const float* part = a.partials + t * S * (rows + 1);
  const int64_t total = S * (rows + 1);
  const bool stage = total <= kMaxStaged;
  if (stage) {  // 4 loads a thread in flight at once: decode's 800 values in one round
    constexpr int kBatch = 4;
    for (int64_t i0 = threadIdx.x; i0 < total; i0 += kBatch * blockDim.x) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t i = i0 + u * blockDim.x;
        v[u] = i < total ? part[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (i0 + u * blockDim.x < total) staged[i0 + u * blockDim.x] = v[u];
    }
  }
  __syncthreads();
  const float* src = stage ? staged : part;
  // Column r < rows is mix r's dot product, column rows the sum of squares: each summed over the
  // slices in order by its own thread, side by side (the squares first took a pass of their own).
  const int r = threadIdx.x;
  float acc = 0;
  if (r <= rows)
    for (int64_t s = 0; s < S; ++s) acc += src[s * (rows + 1) + r];
  if (r == rows) inv = rsqrtf(acc / static_cast<float>(n) + a.norm_eps);
  __syncthreads();
  if (r < rows) m[r] = acc * inv;
  __syncthreads();
}

// y[d] = sum_j c[j] * X[j * H + d] over one token's hc streams, j in order. A thread loads
// kAhead columns' values before it sums any: one block walks the token's hc * H floats (64 KB
// at V4's dims), and a load at a time left decode bound by the latency, not the bytes.
__device__ inline void collapse_row(const float* c, const float* X, int hc, int64_t H, float* y) {
  constexpr int kAhead = 4;
  const int64_t step = blockDim.x;
  int64_t d = threadIdx.x;
  for (; d + (kAhead - 1) * step < H; d += kAhead * step) {
    float v[kMaxHc][kAhead];
#pragma unroll
    for (int j = 0; j < kMaxHc; ++j)
#pragma unroll
      for (int u = 0; u < kAhead; ++u) v[j][u] = j < hc ? X[j * H + d + u * step] : 0.0f;
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      float s = 0;
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j)
        if (j < hc) s = __fmaf_rn(c[j], v[j][u], s);
      y[d + u * step] = s;
    }
  }
  for (; d < H; d += step) {
    float s = 0;
    for (int j = 0; j < hc; ++j) s = __fmaf_rn(c[j], X[j * H + d], s);
    y[d] = s;
  }
}

// collapse_row (+ rms_norm_row) for HC streams of at most kNormRegs * blockDim.x columns, each
// thread's columns (threadIdx.x + u * blockDim.x, as there) kept in registers: all HC * kNormRegs
// loads of X in flight at once (load_streams, issued before the mixes and Sinkhorn that decide
// the weights, so they arrive meanwhile), no second read of y for the norm. The same sums in the
// same order as the loops, so the same bits. Registers: decode's kernel instance only
// (hc_pre_kernel<true>).
template <int HC>
__device__ inline void load_streams(const float* X, int64_t H, float (&x)[HC][kNormRegs]) {
#pragma unroll
  for (int j = 0; j < HC; ++j)
#pragma unroll
    for (int u = 0; u < kNormRegs; ++u) {
      const int64_t d = threadIdx.x + u * int64_t{blockDim.x};
      x[j][u] = d < H ? X[j * H + d] : 0.0f;
    }
}
// norm: whether y is normalized, by weights wv (load_norm_weights).
template <int HC>
__device__ inline void collapse_norm_regs(const float* c, const float (&x)[HC][kNormRegs],
                                          int64_t H, bool norm, const float (&wv)[kNormRegs],
                                          float eps, float* y, __nv_bfloat16* yb, float* scratch) {
  const int64_t step = blockDim.x;
  float v[kNormRegs];
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    float s = 0;
#pragma unroll
    for (int j = 0; j < HC; ++j) s = __fmaf_rn(c[j], x[j][u], s);
    v[u] = s;
  }
  if (norm && yb) {
    rms_norm_regs(v, wv, H, eps, F32AndBf16{y, yb}, scratch);
    return;
  }
  if (norm) {
    rms_norm_regs(v, wv, H, eps, y, scratch);
    return;
  }
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u)
    if (threadIdx.x + u * step < H) y[threadIdx.x + u * step] = v[u];
}

// What lane `lane` of warp 0 reads of the site's scale and base: its pre and post mix (lane <
// hc) and its Sinkhorn cells (lane + 32 h). Weights, so hc_pre loads them before its PDL wait,
// beside the kernel ahead, instead of a round trip to memory on the chain after the mixes.
struct MixWeights {
  float scale[3] = {0, 0, 0}, pre = 0, post = 0, cell[2] = {0, 0};
};
__device__ inline MixWeights load_mix_weights(const HcArgs& a, int lane) {
  MixWeights w;
  const int hc = a.hc;
#pragma unroll
  for (int i = 0; i < 3; ++i) w.scale[i] = a.scale[i];
  if (lane < hc) w.pre = a.base[lane], w.post = a.base[hc + lane];
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (lane + 32 * h < hc * hc) w.cell[h] = a.base[2 * hc + lane + 32 * h];
  return w;
}

// Sinkhorn (spec §6.2) on warp 0: cell i = j * hc + k of comb lives on lane i % 32, slot i / 32;
// kSlots = 1 while hc * hc <= 32 (hc 4), 2 up to hc 8. The slots are template-sized so a lane's
// cells stay in registers (indexed at run time they went to local memory, on the serial chain
// of 41 normalizations). Every sum walks its cells in the serial order, so the bits are the
// ones a single thread would get. kHc > 0: hc is that constant (a.hc must equal it), so each
// sum's shuffles go out together; with hc known only at run time, each shuffle and its add sit
// behind their own `i < hc` branch, one after another on the chain.
template <int kSlots, int kHc = 0>
__device__ void sinkhorn(const HcArgs& a, const MixWeights& w, const float* m, int64_t t,
                         float* comb) {
  const int hc = kHc > 0 ? kHc : a.hc, lane = threadIdx.x, cells = hc * hc;
  const float eps = a.hc_eps;
  float c[kSlots];
  int jj[kSlots], kk[kSlots];
  bool live[kSlots];
#pragma unroll
  for (int h = 0; h < kSlots; ++h) {
    const int i = lane + 32 * h;
    live[h] = i < cells;
    jj[h] = live[h] ? i / hc : 0;
    kk[h] = live[h] ? i % hc : 0;
    c[h] = live[h] ? m[2 * hc + i] * w.scale[2] + w.cell[h] : 0.0f;
  }
  const auto cell_value = [&](int cell) {
    const float x0 = __shfl_sync(0xffffffffu, c[0], cell & 31);
    if (kSlots == 1) return x0;
    const float x1 = __shfl_sync(0xffffffffu, c[kSlots - 1], cell & 31);
    return cell < 32 ? x0 : x1;
  };
  // Row (or column) h's sum of the walk, for this lane's cell in slot h: the shuffles are
  // independent, only the adds chain.
  const auto sum = [&](bool col, int h) {
    float s = 0;
#pragma unroll
    for (int i = 0; i < kMaxHc; ++i)
      if (i < hc) s += cell_value(col ? i * hc + kk[h] : jj[h] * hc + i);
    return s;
  };
  // Row softmax + eps, column normalize, then (iters - 1) x (row, column).
  float mx[kSlots];
#pragma unroll
  for (int h = 0; h < kSlots; ++h) {
    mx[h] = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxHc; ++i)
      if (i < hc) mx[h] = fmaxf(mx[h], cell_value(jj[h] * hc + i));
  }
#pragma unroll
  for (int h = 0; h < kSlots; ++h) c[h] = live[h] ? expf(c[h] - mx[h]) : 0.0f;
  float rs[kSlots];
#pragma unroll
  for (int h = 0; h < kSlots; ++h) rs[h] = sum(false, h);
#pragma unroll
  for (int h = 0; h < kSlots; ++h) c[h] = live[h] ? c[h] / rs[h] + eps : 0.0f;
  // The division is unguarded: a dead slot holds 0 and its sum walks live cells (positive), so it
  // stays 0, and the division needs no branch around it.
  const auto norm = [&](bool col) {
    float d[kSlots];
#pragma unroll
    for (int h = 0; h < kSlots; ++h) d[h] = sum(col, h);
#pragma unroll
    for (int h = 0; h < kSlots; ++h) c[h] /= (d[h] + eps);
  };
  norm(true);
  for (int it = 1; it < a.sinkhorn_iters; ++it) {
    norm(false);
    norm(true);
  }
#pragma unroll
  for (int h = 0; h < kSlots; ++h)
    if (live[h]) comb[t * cells + lane + 32 * h] = c[h];
}

// What hc_pre_kernel's register instance loads before its PDL wait: warp 0's mix weights and
// the norm's.
struct PreWeights {
  MixWeights mix;
  NormWeights norm;
};

// pre_in null: the collapse uses the site's own pre (V4). Otherwise (V4.1's deferred mHC) it uses
// pre_in (the previous site's), and the site's own pre goes to pre_out (which may alias pre_in).
// Four blocks an SM: the collapse reads hc rows of fp32 a token and needs the warps. Left to
// itself ptxas gives the register Sinkhorn 72 registers (three blocks), which made a 4k prefill's
// mHC 0.5-0.8 ms slower on an H100 than main's 56 (docs/gpu_next_b1/).
#ifndef HC_PRE_MIN_BLOCKS
#define HC_PRE_MIN_BLOCKS 4
#endif
// The register collapse's stream count (V4 and V4.1: hc_mult 4) and batch limit (decode up to
// B=128); against the loops it took B=1 2.78 -> 2.73 ms a step on an H100 (docs/gpu_pdl/).
constexpr int kRegsHc = 4;
constexpr int64_t kHcRegsMaxTokens = 128;

// kRegs: collapse_norm_regs for a batch of at most kHcRegsMaxTokens tokens (one block each;
// its 64 loads of X need the registers that four blocks an SM would not leave).
template <bool kRegs>
__global__ void __launch_bounds__(kThreads, kRegs ? 1 : HC_PRE_MIN_BLOCKS)
    hc_pre_kernel(HcArgs a, const float* Xall, const float* pre_in, float* pre_out, float* y,
                  float* post, float* comb) {
  const auto w = pdl_grid_begin([&] {
    PreWeights l;
    if constexpr (kRegs) {  // the prefill instance has no registers to keep them in
      if (threadIdx.x < 32) l.mix = load_mix_weights(a, threadIdx.x);
      l.norm = load_norm_weights(a.y_norm, a.hidden);
    }
    return l;
  });
  __shared__ float m[kMaxMix], collapse[kMaxHc], norm_scratch[32];
  const int hc = a.hc;
  const int64_t t = blockIdx.x, H = a.hidden;
  const float* X = Xall + t * hc * H;
  float x[kRegsHc][kNormRegs];
  if constexpr (kRegs) load_streams(X, H, x);
  mixes(a, (2 + hc) * hc, m);
  if (threadIdx.x < 32) {
    const float eps = a.hc_eps;
    const int lane = threadIdx.x;
    const MixWeights mw = kRegs ? w.mix : load_mix_weights(a, lane);
    if (lane < hc) {
      const float pre = sigmoidf(m[lane] * mw.scale[0] + mw.pre) + eps;
      post[t * hc + lane] = 2.0f * sigmoidf(m[hc + lane] * mw.scale[1] + mw.post);
      collapse[lane] = pre_in ? pre_in[t * hc + lane] : pre;
      if (pre_out) pre_out[t * hc + lane] = pre;
    }
    if constexpr (kRegs)
      sinkhorn<1, kRegsHc>(a, mw, m, t, comb);  // pre_kernel takes kRegs only at hc == kRegsHc
    else if (hc * hc <= 32)
      sinkhorn<1>(a, mw, m, t, comb);
    else
      sinkhorn<2>(a, mw, m, t, comb);
  }
  __syncthreads();
  if constexpr (kRegs) {
    collapse_norm_regs<kRegsHc>(collapse, x, H, a.y_norm != nullptr, w.norm.v, a.y_norm_eps,
                                y + t * H, a.y_bf16 ? a.y_bf16 + t * H : nullptr, norm_scratch);
  } else {
    collapse_row(collapse, X, hc, H, y + t * H);
    // Each thread normalizes the columns it just wrote (the same ones rms_norm's thread would
    // take), so no barrier is needed before the norm's first read.
    if (a.y_norm && a.y_bf16)
      rms_norm_row_loop(y + t * H, a.y_norm, H, a.y_norm_eps,
                        F32AndBf16{y + t * H, a.y_bf16 + t * H}, norm_scratch);
    else if (a.y_norm)
      rms_norm_row_loop(y + t * H, a.y_norm, H, a.y_norm_eps, y + t * H, norm_scratch);
  }
}

__global__ void hc_collapse_kernel(const float* pre, const float* Xall, int hc, int64_t H,
                                   float* y) {
  pdl_grid_begin();
  const int64_t t = blockIdx.x;
  collapse_row(pre + t * hc, Xall + t * hc * H, hc, H, y + t * H);
}

// The head's collapse: y = sum_j (sigmoid(m_j * scale + base_j) + eps) X_j. The weights are
// formed once a block, then collapse_row's loads run ahead (forming them per column put four
// sigmoids and a load round trip on every column's chain: 20 us at B=1 on an H100).
__global__ void hc_head_kernel(HcArgs a, const float* Xall, float* y) {
  pdl_grid_begin();
  __shared__ float m[kMaxHc], c[kMaxHc];
  const int hc = a.hc;
  const int64_t t = blockIdx.x, H = a.hidden;
  mixes(a, hc, m);
  if (threadIdx.x < hc)
    c[threadIdx.x] = sigmoidf(m[threadIdx.x] * a.scale[0] + a.base[threadIdx.x]) + a.hc_eps;
  __syncthreads();
  collapse_row(c, Xall + t * hc * H, hc, H, y + t * H);
}

// A thread per (token, 4 columns d): reads the hc inputs of its columns before writing any output.
// The token comes from the grid's y, so no 64-bit division runs per value; each output's sum
// keeps the order j = 0..hc-1.
__global__ void hc_post_kernel(const float* f, const float* post, const float* comb, int64_t tokens,
                               int hc, int64_t H, float* X) {
  pdl_grid_begin();
  const int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, d0 = 4 * q;
  if (d0 >= H) return;
  const bool vec = H % 4 == 0;  // else a column at a time (rows of 16-byte alignment needed)
  const int cols = vec ? 4 : static_cast<int>(H - d0 < 4 ? H - d0 : 4);
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    float* Xt = X + t * hc * H;
    const float* ct = comb + t * hc * hc;
    float in[kMaxHc][4], fv[4];
#pragma unroll
    for (int j = 0; j < kMaxHc; ++j) {
      if (j >= hc) break;
      if (vec) {
        const float4 v = *reinterpret_cast<const float4*>(Xt + j * H + d0);
        in[j][0] = v.x, in[j][1] = v.y, in[j][2] = v.z, in[j][3] = v.w;
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) in[j][c] = c < cols ? Xt[j * H + d0 + c] : 0.0f;
      }
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) fv[c] = c < cols ? f[t * H + d0 + c] : 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) {
      if (k >= hc) break;
      const float p = post[t * hc + k];
      float o[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float s = p * fv[c];
#pragma unroll
        for (int j = 0; j < kMaxHc; ++j)
          if (j < hc) s += ct[j * hc + k] * in[j][c];
        o[c] = s;
      }
      if (vec) {
        *reinterpret_cast<float4*>(Xt + k * H + d0) = make_float4(o[0], o[1], o[2], o[3]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (c < cols) Xt[k * H + d0 + c] = o[c];
      }
    }
  }
}

using PreKernel = void (*)(HcArgs, const float*, const float*, float*, float*, float*, float*);

// The register collapse where it applies (collapse_norm_regs); either gives the same bits.
PreKernel pre_kernel(const HcArgs& a) {
  const bool regs =
      a.hc == kRegsHc && a.hidden <= kNormRegs * kThreads && a.tokens <= kHcRegsMaxTokens;
  return regs ? hc_pre_kernel<true> : hc_pre_kernel<false>;
}

void check_hc(int hc) {
  if (hc < 1 || hc > kMaxHc) {
    std::fprintf(stderr, "mhc: hc_mult %d outside 1..%d\n", hc, kMaxHc);
    std::abort();
  }
}

// y_bf16 rides on the fused norm's stores.
void check_bf16_output(const HcArgs& a) {
  if (a.y_bf16 && !a.y_norm) {
    std::fprintf(stderr, "mhc: HcArgs::y_bf16 needs y_norm (the bf16 copy is the norm's)\n");
    std::abort();
  }
}

}  // namespace

size_t hc_scratch_floats(int64_t tokens, int hc, int64_t hidden) {
  return static_cast<size_t>(tokens * slices(hc * hidden) * ((2 + hc) * hc + 1));
}

void hc_pre(const HcArgs& a, const float* X, float* y, float* post, float* comb,
            cudaStream_t stream) {
  check_hc(a.hc);
  check_bf16_output(a);
  if (a.tokens == 0) return;
  launch_partials(a, X, (2 + a.hc) * a.hc, stream);
  launch_kernel(pre_kernel(a), static_cast<unsigned>(a.tokens), kThreads, 0, stream, a, X, nullptr,
                nullptr, y, post, comb);
}

void hc_pre_deferred(const HcArgs& a, const float* X, const float* pre_in, float* pre_out, float* y,
                     float* post, float* comb, cudaStream_t stream) {
  check_hc(a.hc);
  check_bf16_output(a);
  if (a.tokens == 0) return;
  launch_partials(a, X, (2 + a.hc) * a.hc, stream);
  launch_kernel(pre_kernel(a), static_cast<unsigned>(a.tokens), kThreads, 0, stream, a, X, pre_in,
                pre_out, y, post, comb);
}

void hc_collapse(const float* pre, const float* X, int64_t tokens, int hc, int64_t hidden, float* y,
                 cudaStream_t stream) {
  check_hc(hc);
  if (tokens == 0) return;
  launch_kernel(hc_collapse_kernel, static_cast<unsigned>(tokens), kThreads, 0, stream, pre, X, hc,
                hidden, y);
}

void hc_post(const float* f, const float* post, const float* comb, int64_t tokens, int hc,
             int64_t hidden, float* X, cudaStream_t stream) {
  check_hc(hc);
  if (tokens == 0 || hidden == 0) return;
  const dim3 grid(static_cast<unsigned>(((hidden + 3) / 4 + 255) / 256),
                  static_cast<unsigned>(tokens < 65535 ? tokens : 65535));
  launch_kernel(hc_post_kernel, grid, 256, 0, stream, f, post, comb, tokens, hc, hidden, X);
}

void hc_head(const HcArgs& a, const float* X, float* y, cudaStream_t stream) {
  check_hc(a.hc);
  if (a.tokens == 0) return;
  launch_partials(a, X, a.hc, stream);
  launch_kernel(hc_head_kernel, static_cast<unsigned>(a.tokens), kThreads, 0, stream, a, X, y);
}

}  // namespace deepinfer::cuda
