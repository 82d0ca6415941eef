// CUDA dense ops against the CPU reference: RMSNorm, the cuBLASLt GEMMs, RoPE, mHC, argmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cuda/attention/norm_rope.h"
#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/sampling/argmax.h"
#include "deepinfer/model/deepseek_v4/mhc.h"
#include "deepinfer/model/deepseek_v4/rope.h"

namespace deepinfer::cuda {
namespace {

using namespace deepinfer::cuda::testing;

// Rows of up to 16 values a thread (4096 at 256 threads) go through registers, 1000 partly
// masked; 16384 takes the loop.
TEST(CudaRmsNorm, MatchesCpuWithAndWithoutWeightAndInPlace) {
  for (auto [rows, d] :
       {std::pair<int64_t, int64_t>{1, 4096}, {7, 1024}, {33, 512}, {3, 1000}, {5, 16384}}) {
    const auto x = randn(rows * d, 3.0f), w = randn(d);
    for (bool weighted : {true, false}) {
      std::vector<float> want(rows * d);
      for (int64_t r = 0; r < rows; ++r)
        cpu::rms_norm(&x[r * d], weighted ? w.data() : nullptr, d, 1e-6f, &want[r * d]);
      DeviceBuffer<float> dx(x), dw(w), dy(rows * d);
      dy.poison();
      rms_norm(dx.get(), weighted ? dw.get() : nullptr, rows, d, 1e-6f, dy.get(), nullptr);
      EXPECT_TRUE(close(dy.download(), want, kF32Tol)) << rows << "x" << d;
      rms_norm(dx.get(), weighted ? dw.get() : nullptr, rows, d, 1e-6f, dx.get(), nullptr);
      EXPECT_TRUE(close(dx.download(), want, kF32Tol)) << "in place " << rows << "x" << d;
    }
  }
}

// The warp-a-row form (per-head q norm): against the CPU, in place, for rows of 512 (V4's head),
// one not a multiple of 4 and one shorter than a warp; and a row alone keeps its bits.
TEST(CudaRmsNorm, RowsFormMatchesCpuInPlaceAndAlone) {
  for (auto [rows, d] : {std::pair<int64_t, int64_t>{1000, 512}, {9, 70}, {17, 20}}) {
    const auto x = randn(rows * d, 3.0f);
    std::vector<float> want(rows * d);
    for (int64_t r = 0; r < rows; ++r) cpu::rms_norm(&x[r * d], nullptr, d, 1e-6f, &want[r * d]);
    DeviceBuffer<float> dx(x), dy(rows * d), one(d);
    dy.poison();
    rms_norm_rows(dx.get(), rows, d, 1e-6f, dy.get(), nullptr);
    const auto got = dy.download();
    EXPECT_TRUE(close(got, want, kF32Tol)) << rows << "x" << d;
    rms_norm_rows(dx.get() + (rows - 1) * d, 1, d, 1e-6f, one.get(), nullptr);
    EXPECT_EQ(one.download(), std::vector<float>(got.end() - d, got.end())) << "alone, " << d;
    rms_norm_rows(dx.get(), rows, d, 1e-6f, dx.get(), nullptr);
    EXPECT_EQ(dx.download(), got) << "in place " << rows << "x" << d;
  }
}

// The bf16-output form (qr's norm, whose fp32 copy nothing reads): the bits of rms_norm then
// to_bf16, and the CPU's norm rounded to bf16 within an ulp.
TEST(CudaRmsNorm, Bf16OutputIsTheNormThenToBf16) {
  for (auto [rows, d] : {std::pair<int64_t, int64_t>{1, 1024}, {7, 4096}, {3, 1000}, {2, 16384}}) {
    const auto x = randn(rows * d, 3.0f), w = randn(d);
    std::vector<float> want(rows * d);
    for (int64_t r = 0; r < rows; ++r) cpu::rms_norm(&x[r * d], w.data(), d, 1e-6f, &want[r * d]);
    DeviceBuffer<float> dx(x), dw(w), dy(rows * d);
    DeviceBuffer<uint16_t> fused(rows * d), separate(rows * d);
    fused.poison();
    separate.poison();
    rms_norm(dx.get(), dw.get(), rows, d, 1e-6f, reinterpret_cast<__nv_bfloat16*>(fused.get()),
             nullptr);
    rms_norm(dx.get(), dw.get(), rows, d, 1e-6f, dy.get(), nullptr);
    to_bf16(dy.get(), rows * d, reinterpret_cast<__nv_bfloat16*>(separate.get()), nullptr);
    const auto got = fused.download();
    EXPECT_EQ(got, separate.download()) << rows << "x" << d;
    std::vector<float> values(got.size());
    std::transform(got.begin(), got.end(), values.begin(), bf16_to_float);
    EXPECT_TRUE(close(values, want, kBf16Tol)) << rows << "x" << d;
  }
}

// norm_rope: V4's q heads (per-warp norm) beside its kv row (weighted block norm), V4.1's q
// (RoPE only) beside kv, one set alone, at 1, 3 and 37 tokens of 64 heads of 512 with a 64-wide
// tail: against the CPU's norm then its RoPE table, and bit for bit the separate launches
// (rms_norm_rows or rms_norm, then rope).
TEST(CudaNormRope, MatchesCpuAndTheSeparateOps) {
  const v4::RopeTable table(10000, 64, nullptr);
  const int heads = 64, rd = 64;
  const int64_t d = 512;
  for (const int64_t T : {int64_t{1}, int64_t{3}, int64_t{37}}) {
    std::vector<int64_t> pos(T);
    std::uniform_int_distribution<int64_t> pd(0, 1 << 20);
    for (auto& p : pos) p = pd(rng());
    DeviceBuffer<int64_t> dp(pos);
    DeviceBuffer<double> df(table.inv_freq());
    const auto w = randn(d);
    DeviceBuffer<float> dw(w);
    for (const RowNorm qnorm : {RowNorm::kPerWarp, RowNorm::kNone}) {
      for (const bool with_kv : {true, false}) {
        const auto q = randn(T * heads * d, 3.0f), kv = randn(T * d, 3.0f);
        auto want_q = q, want_kv = kv;
        for (int64_t r = 0; r < T * heads; ++r) {
          if (qnorm == RowNorm::kPerWarp)
            cpu::rms_norm(&q[r * d], nullptr, d, 1e-6f, &want_q[r * d]);
          table.rotate(&want_q[r * d + d - rd], pos[r / heads], false);
        }
        for (int64_t r = 0; r < T; ++r) {
          cpu::rms_norm(&kv[r * d], w.data(), d, 1e-6f, &want_kv[r * d]);
          table.rotate(&want_kv[r * d + d - rd], pos[r], false);
        }
        DeviceBuffer<float> fq(q), fkv(kv), sq(q), skv(kv);
        norm_rope({fq.get(), T * heads, heads, qnorm, nullptr},
                  {fkv.get(), with_kv ? T : 0, 1, RowNorm::kPerBlock, dw.get()}, d, rd, dp.get(),
                  df.get(), 1e-6f, nullptr);
        if (qnorm == RowNorm::kPerWarp)
          rms_norm_rows(sq.get(), T * heads, d, 1e-6f, sq.get(), nullptr);
        rope(sq.get() + d - rd, T * heads, d, rd, heads, dp.get(), df.get(), false, nullptr);
        rms_norm(skv.get(), dw.get(), T, d, 1e-6f, skv.get(), nullptr);
        rope(skv.get() + d - rd, T, d, rd, 1, dp.get(), df.get(), false, nullptr);
        const std::string what = std::to_string(T) + " tokens, q " +
                                 (qnorm == RowNorm::kPerWarp ? "normed" : "rotated only") +
                                 (with_kv ? ", kv beside" : ", alone");
        const auto got_q = fq.download();
        EXPECT_TRUE(close(got_q, want_q, kF32Tol)) << "q: " << what;
        EXPECT_EQ(got_q, sq.download()) << "q against the separate ops: " << what;
        const auto got_kv = fkv.download();
        if (with_kv) {
          EXPECT_TRUE(close(got_kv, want_kv, kF32Tol)) << "kv: " << what;
          EXPECT_EQ(got_kv, skv.download()) << "kv against the separate ops: " << what;
        } else {
          EXPECT_EQ(got_kv, kv) << "kv untouched when its set is empty: " << what;
        }
      }
    }
  }
}

// Reference on the same bf16-rounded operands in fp32: only the summation order differs.
TEST(CudaGemm, Bf16MatchesCpuOnRoundedOperandsAtV4FlashShapes) {
  Gemm gemm;
  struct Shape {
    int64_t n, out, in;
  };
  // wq_a, wq_b, wo_b, a small odd one, and the vocabulary head.
  for (Shape s : {Shape{1, 1024, 4096},
                  {8, 32768, 1024},
                  {33, 4096, 8192},
                  {5, 77, 300},
                  {3, 129280, 4096}}) {
    const auto w = round_bf16(randn(s.out * s.in, 0.02f));
    const auto x = round_bf16(randn(s.n * s.in));
    std::vector<float> want(s.n * s.out);
    cpu::linear(w.data(), s.out, s.in, x.data(), s.n, want.data());
    DeviceBuffer<uint16_t> dw(bf16_bits(w)), dx(bf16_bits(x));
    DeviceBuffer<float> dy(s.n * s.out);
    dy.poison();
    gemm.bf16(reinterpret_cast<const __nv_bfloat16*>(dw.get()),
              reinterpret_cast<const __nv_bfloat16*>(dx.get()), dy.get(), s.n, s.out, s.in,
              nullptr);
    EXPECT_TRUE(close(dy.download(), want, kF32Tol)) << s.n << "x" << s.out << "x" << s.in;
  }
}

TEST(CudaGemm, F32MatchesCpuWithoutTf32) {
  Gemm gemm;
  for (auto [n, out, in] : {std::tuple<int64_t, int64_t, int64_t>{7, 256, 4096}, {1, 300, 77}}) {
    const auto w = randn(out * in, 0.02f), x = randn(n * in);
    std::vector<float> want(n * out);
    cpu::linear(w.data(), out, in, x.data(), n, want.data());
    DeviceBuffer<float> dw(w), dx(x), dy(n * out);
    dy.poison();
    gemm.f32(dw.get(), dx.get(), dy.get(), n, out, in, nullptr);
    // TF32 would land near 3e-4 (METHOD.md); plain fp32 far under 1e-5.
    EXPECT_TRUE(close(dy.download(), want, kF32Tol)) << n << "x" << out << "x" << in;
  }
}

// Both forms: 8 values a thread (16-byte aligned operands; n % 8 left over, or n under 8) and
// one a thread (an operand 4 bytes off alignment).
TEST(CudaGemm, ToBf16RoundsLikeTheCpu) {
  for (const int64_t n : {int64_t{10007}, int64_t{4096}, int64_t{8}, int64_t{5}}) {
    for (const int offset : {0, 1}) {
      const auto x = randn(n + offset, 5.0f);
      DeviceBuffer<float> dx(x);
      DeviceBuffer<uint16_t> dy(n + offset);
      dy.poison();
      to_bf16(dx.get() + offset, n, reinterpret_cast<__nv_bfloat16*>(dy.get()) + offset, nullptr);
      const std::vector<float> tail(x.begin() + offset, x.end());
      const auto got = dy.download();
      EXPECT_EQ(std::vector<uint16_t>(got.begin() + offset, got.end()), bf16_bits(tail))
          << n << " values at offset " << offset;
    }
  }
}

TEST(CudaRope, MatchesCpuTablesForMainAndYarnCompressedPositions) {
  v4::YarnConfig yarn;
  yarn.enabled = true;
  yarn.factor = 16;
  yarn.original_max_position_embeddings = 65536;
  yarn.beta_fast = 32;
  yarn.beta_slow = 1;
  const v4::RopeTable main_rope(10000, 64, nullptr), comp_rope(160000, 64, &yarn);
  const int heads = 64, hd = 512, rd = 64;
  const int64_t T = 9;
  std::vector<int64_t> pos(T);
  std::uniform_int_distribution<int64_t> pd(0, 1 << 20);
  for (auto& p : pos) p = pd(rng());
  pos[0] = 0;
  for (const v4::RopeTable* table : {&main_rope, &comp_rope}) {
    for (bool inverse : {false, true}) {
      const auto x = randn(T * heads * hd);
      auto want = x;
      for (int64_t r = 0; r < T * heads; ++r)
        table->rotate(&want[r * hd + hd - rd], pos[r / heads], inverse);
      DeviceBuffer<float> dx(x);
      DeviceBuffer<int64_t> dp(pos);
      DeviceBuffer<double> df(table->inv_freq());
      rope(dx.get() + (hd - rd), T * heads, hd, rd, heads, dp.get(), df.get(), inverse, nullptr);
      EXPECT_TRUE(close(dx.download(), want, kF32Tol)) << (inverse ? "inverse" : "forward");
    }
  }
}

v4::Config hc_config(int64_t hidden) {
  v4::Config c;
  c.hidden_size = hidden;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  return c;
}

// V4-Flash's width, and 70 (not a multiple of 4: hc_post's column-at-a-time path); a launch's
// first tokens must have the bits they get in a launch of their own, whose partial sums group 4
// tokens a block (300 and 257 tokens: blocks of 8, the last one partial; 600: blocks of 16).
TEST(CudaMhc, PrePostAndHeadMatchCpuAtV4FlashAndAnOddWidth) {
  for (const auto& [hidden, tokens] : std::vector<std::pair<int64_t, int64_t>>{{4096, 1},
                                                                               {4096, 3},
                                                                               {4096, 17},
                                                                               {4096, 300},
                                                                               {4096, 600},
                                                                               {70, 1},
                                                                               {70, 5},
                                                                               {70, 257}}) {
    const v4::Config c = hc_config(hidden);
    const int hc = c.hc_mult, mix = c.mix_hc();
    const int64_t H = c.hidden_size, n = hc * H;
    const auto X = randn(tokens * n), f = randn(tokens * H);
    const auto fn = randn(mix * n, 1.0f / 64), base = randn(mix, 0.5f), scale = randn(3, 0.5f);
    const auto hfn = randn(hc * n, 1.0f / 64), hbase = randn(hc, 0.5f), hscale = randn(1, 0.5f);
    std::vector<float> y(tokens * H), post(tokens * hc), comb(tokens * hc * hc), Xp = X,
                                                                                 yh(tokens * H);
    for (int64_t t = 0; t < tokens; ++t) {
      v4::hc_pre(c, {fn.data(), base.data(), scale.data()}, &X[t * n], &y[t * H], &post[t * hc],
                 &comb[t * hc * hc]);
      v4::hc_post(c, &f[t * H], &post[t * hc], &comb[t * hc * hc], &Xp[t * n]);
      v4::hc_head(c, {hfn.data(), hbase.data(), hscale.data()}, &X[t * n], &yh[t * H]);
    }
    DeviceBuffer<float> dX(X), df(f), dfn(fn), dbase(base), dscale(scale), dhfn(hfn), dhbase(hbase),
        dhscale(hscale), dy(tokens * H), dpost(tokens * hc), dcomb(tokens * hc * hc),
        dyh(tokens * H), dpart(hc_scratch_floats(tokens, hc, H));
    for (auto* b : {&dy, &dpost, &dcomb, &dyh, &dpart}) b->poison();
    HcArgs a{dfn.get(), dbase.get(),         dscale.get(), tokens, H,
             hc,        c.hc_sinkhorn_iters, 1e-6f,        1e-6f,  dpart.get()};
    hc_pre(a, dX.get(), dy.get(), dpost.get(), dcomb.get(), nullptr);
    // Rerun on poisoned partials: every value read must have been written by this call, and the
    // fixed summation order makes the result bit-identical.
    const auto y_first = dy.download();
    dpart.poison();
    dy.poison();
    hc_pre(a, dX.get(), dy.get(), dpost.get(), dcomb.get(), nullptr);
    EXPECT_EQ(dy.download(), y_first) << "hc_pre is not deterministic";
    if (tokens > 3) {
      HcArgs few = a;
      few.tokens = 3;
      DeviceBuffer<float> fy(3 * H), fpost(3 * hc), fcomb(3 * hc * hc);
      hc_pre(few, dX.get(), fy.get(), fpost.get(), fcomb.get(), nullptr);
      EXPECT_EQ(fy.download(), std::vector<float>(y_first.begin(), y_first.begin() + 3 * H))
          << hidden << ": three tokens alone differ from the same tokens among " << tokens;
    }
    // The input norm fused into hc_pre and hc_pre_deferred (HcArgs::y_norm): the bits of
    // rms_norm launched on their y afterwards.
    {
      const auto nw = randn(H), pin = randn(tokens * hc, 0.5f);  // pin: a previous site's pre
      DeviceBuffer<float> dnw(nw), dpin(pin), fused(tokens * H), sep(tokens * H), pre(tokens * hc);
      for (const bool deferred : {false, true}) {
        HcArgs fa = a;
        fa.y_norm = dnw.get();
        fa.y_norm_eps = 1e-6f;
        fused.poison();
        sep.poison();
        if (deferred) {
          hc_pre_deferred(a, dX.get(), dpin.get(), pre.get(), sep.get(), dpost.get(), dcomb.get(),
                          nullptr);
          hc_pre_deferred(fa, dX.get(), dpin.get(), pre.get(), fused.get(), dpost.get(),
                          dcomb.get(), nullptr);
        } else {
          hc_pre(a, dX.get(), sep.get(), dpost.get(), dcomb.get(), nullptr);
          hc_pre(fa, dX.get(), fused.get(), dpost.get(), dcomb.get(), nullptr);
        }
        rms_norm(sep.get(), dnw.get(), tokens, H, 1e-6f, sep.get(), nullptr);
        const auto want = sep.download();
        EXPECT_EQ(fused.download(), want)
            << hidden << " x " << tokens << (deferred ? " deferred" : "") << ": fused norm";
        // With y_bf16 too: y keeps those bits and its bf16 copy is to_bf16's of them.
        DeviceBuffer<uint16_t> yb(tokens * H), yb_want(tokens * H);
        yb.poison();
        fused.poison();
        fa.y_bf16 = reinterpret_cast<__nv_bfloat16*>(yb.get());
        if (deferred)
          hc_pre_deferred(fa, dX.get(), dpin.get(), pre.get(), fused.get(), dpost.get(),
                          dcomb.get(), nullptr);
        else
          hc_pre(fa, dX.get(), fused.get(), dpost.get(), dcomb.get(), nullptr);
        to_bf16(sep.get(), tokens * H, reinterpret_cast<__nv_bfloat16*>(yb_want.get()), nullptr);
        EXPECT_EQ(fused.download(), want)
            << hidden << " x " << tokens << (deferred ? " deferred" : "") << ": y beside y_bf16";
        EXPECT_EQ(yb.download(), yb_want.download())
            << hidden << " x " << tokens << (deferred ? " deferred" : "") << ": y_bf16";
      }
      hc_pre(a, dX.get(), dy.get(), dpost.get(), dcomb.get(), nullptr);  // restore post, comb
    }
    HcArgs ha{dhfn.get(), dhbase.get(), dhscale.get(), tokens, H, hc, 0, 1e-6f, 1e-6f, dpart.get()};
    hc_head(ha, dX.get(), dyh.get(), nullptr);
    EXPECT_TRUE(close(dy.download(), y, kF32Tol)) << hidden << " x " << tokens;
    EXPECT_TRUE(close(dpost.download(), post, kF32Tol)) << hidden << " x " << tokens;
    EXPECT_TRUE(close(dcomb.download(), comb, kF32Tol)) << hidden << " x " << tokens;
    EXPECT_TRUE(close(dyh.download(), yh, kF32Tol)) << hidden << " x " << tokens;
    // hc_post from the CPU's post and comb, so this checks the combine alone.
    DeviceBuffer<float> cpost(post), ccomb(comb);
    hc_post(df.get(), cpost.get(), ccomb.get(), tokens, hc, H, dX.get(), nullptr);
    EXPECT_TRUE(close(dX.download(), Xp, kF32Tol)) << hidden << " x " << tokens;
  }
}

// V4's vocab (the float4 path) and a width that is not a multiple of 4 (the scalar one).
TEST(CudaArgmax, HighestLogitWithTiesToTheLowerIdAndNanIgnored) {
  for (const int64_t V : {int64_t{129280}, int64_t{1001}}) {
    const int64_t rows = 5;
    auto logits = randn(rows * V, 4.0f);
    std::fill(&logits[1 * V], &logits[2 * V], 0.5f);   // all equal: token 0
    logits[2 * V + 7] = logits[2 * V + V - 3] = 1e9f;  // tie between two maxima: 7
    logits[3 * V + 11] = NAN;                          // NaN is not a maximum
    logits[3 * V + 12] = 1e9f;
    std::vector<int32_t> want(rows);
    for (int64_t r = 0; r < rows; ++r) {
      int32_t best = 0;
      for (int64_t i = 1; i < V; ++i)
        if (logits[r * V + i] > logits[r * V + best]) best = static_cast<int32_t>(i);
      want[r] = best;
    }
    ASSERT_EQ(want[1], 0);
    ASSERT_EQ(want[2], 7);
    DeviceBuffer<float> dl(logits);
    DeviceBuffer<int32_t> dout(rows);
    dout.poison();
    argmax_rows(dl.get(), rows, V, dout.get(), nullptr);
    EXPECT_EQ(dout.download(), want) << V;
  }
}

}  // namespace
}  // namespace deepinfer::cuda
