// CUDA MoE ops against the CPU model's own functions: routing (hash and biased top-k, real
// V4-Flash expert count) and the routed + shared experts (moe_forward, plain numerics), at real
// hidden and intermediate sizes with fewer experts (the full 256 would not fit a CPU reference).
#include <gtest/gtest.h>

#include <string>

#include "cuda_test_util.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"
#include "deepinfer/backend/cuda/gemm/linear.h"
#include "deepinfer/backend/cuda/moe/experts.h"
#include "deepinfer/backend/cuda/moe/routing.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "quant_matrix_fixture.h"

namespace deepinfer::cuda {
namespace {

using namespace deepinfer::cuda::testing;

TEST(CudaRouting, BiasedTopKAndHashMatchCpuAtV4FlashDims) {
  const int E = 256, K = 6;
  const int64_t T = 70, vocab = 1000;
  const auto logits = randn(T * E, 2.0f), bias = randn(E, 0.1f);
  std::vector<int32_t> tid2eid(vocab * K), ids(T);
  std::uniform_int_distribution<int32_t> ed(0, E - 1), td(0, vocab - 1);
  for (auto& e : tid2eid) e = ed(rng());
  for (auto& t : ids) t = td(rng());
  for (bool hash : {false, true}) {
    std::vector<int> want_idx(T * K);
    std::vector<float> want_w(T * K);
    for (int64_t t = 0; t < T; ++t)
      v4::route_token(&logits[t * E], hash ? nullptr : bias.data(),
                      hash ? &tid2eid[ids[t] * K] : nullptr, E, K, 1.5f, &want_idx[t * K],
                      &want_w[t * K]);
    DeviceBuffer<float> dl(logits), db(bias), dw(T * K);
    DeviceBuffer<int32_t> dt(tid2eid), di(ids), dsel(T * K);
    dw.poison();
    dsel.poison();
    RoutingArgs a;
    a.logits = dl.get();
    a.bias = db.get();
    a.tid2eid = hash ? dt.get() : nullptr;
    a.token_ids = di.get();
    a.tokens = T;
    a.num_experts = E;
    a.top_k = K;
    a.route_scale = 1.5f;
    route(a, dsel.get(), dw.get(), nullptr);
    const auto sel = dsel.download();
    for (int64_t i = 0; i < T * K; ++i)
      ASSERT_EQ(sel[i], want_idx[i]) << (hash ? "hash" : "biased") << " slot " << i;
    EXPECT_TRUE(close(dw.download(), want_w, kF32Tol)) << (hash ? "hash" : "biased");
  }
}

struct MoeCase {
  int64_t tokens, hidden, inter;
  int experts, top_k;
  int favoured = -1;       // an expert whose router bias every token's top-k picks first
  bool quantized = false;  // MXFP4 routed experts, FP8 shared expert (the checkpoint's formats)
};

// Both MoeRunner paths (host grouping + Linear, device grouping + grouped kernels) against the
// CPU's moe_forward. bf16-rounded weights on both sides, or stored FP8 / MXFP4 on the GPU and
// their host dequantization on the CPU; the GPU also rounds activations to bf16 before each
// GEMM, the CPU does not: hence the bf16 tolerance.
TEST(CudaMoe, RoutedAndSharedExpertsMatchCpuMoeForward) {
  for (MoeCase k :
       {MoeCase{9, 256, 128, 8, 2}, MoeCase{16, 4096, 2048, 16, 6},
        // many experts over the grouped kernels' 8-row chunk
        MoeCase{128, 256, 128, 16, 6},
        // skewed: one expert gets all 128 tokens (16 chunks), the other picks spread
        MoeCase{128, 256, 128, 16, 6, /*favoured=*/5},
        // stored formats: few rows per expert (weight_gemv) and, skewed, many
        // (dequantize + cuBLASLt in run())
        MoeCase{16, 4096, 2048, 16, 6, -1, /*quantized=*/true},
        MoeCase{128, 256, 128, 16, 6, /*favoured=*/5, /*quantized=*/true},
        // a prefill chunk's shape for the pipelined MXFP4 kernel: ~48 rows per
        // expert (64-row passes, several K tiles, some experts over 64 rows)
        MoeCase{256, 1024, 512, 32, 6, -1, /*quantized=*/true},
        // decode's 16-row passes, skewed: the favoured expert's 40 rows are three passes in
        // its block
        MoeCase{40, 512, 256, 16, 6, /*favoured=*/5, /*quantized=*/true},
        // prefill's 64-row passes, skewed: the favoured expert's 128 rows are two passes, each
        // its own grid row (the W4 kernel wants hidden and inter multiples of 256)
        MoeCase{128, 512, 256, 16, 6, /*favoured=*/5, /*quantized=*/true},
        // prefill at the real dims (wgmma gate-up): 36 rows an expert on average, 16 experts
        MoeCase{96, 4096, 2048, 16, 6, -1, /*quantized=*/true},
        // over 64 rows an expert on average (wgmma's 128-row passes): at the real dims, and
        // skewed, the favoured expert's rows two passes (the last partial): 160 of them at
        // small dims, 200 at the real ones
        MoeCase{160, 4096, 2048, 4, 2, -1, /*quantized=*/true},
        MoeCase{160, 512, 256, 8, 4, /*favoured=*/5, /*quantized=*/true},
        MoeCase{200, 4096, 2048, 4, 2, /*favoured=*/1, /*quantized=*/true},
        // decode's few tokens: the CUDA-core kernels' rows per pass follow the
        // batch (1, 2, 4), one token at real dims in MXFP4
        MoeCase{1, 4096, 2048, 16, 6, -1, /*quantized=*/true}, MoeCase{2, 256, 128, 8, 2},
        MoeCase{3, 256, 128, 8, 2, -1, /*quantized=*/true},
        // the W4 kernels' narrow case (up to 4 tokens) at small dims, and skewed: the favoured
        // expert holds every token's row
        MoeCase{4, 512, 256, 8, 2, -1, /*quantized=*/true},
        MoeCase{4, 512, 256, 8, 2, /*favoured=*/5, /*quantized=*/true}}) {
    v4::Config c;
    c.hidden_size = k.hidden;
    c.n_routed_experts = k.experts;
    c.experts_per_token = k.top_k;
    c.moe_intermediate_size = k.inter;
    c.n_shared_experts = 1;
    c.routed_scaling_factor = 1.5;
    c.swiglu_limit = 10.0;
    v4::Weights w;
    const std::string p = "layers.0.";
    const float ws = 1.0f / std::sqrt(static_cast<float>(k.hidden));
    w.f32()[p + "ffn.gate.weight"] = randn(k.experts * k.hidden, ws);
    w.f32()[p + "ffn.gate.bias"] = randn(k.experts, 0.1f);
    // Affinities are sqrt(softplus(logit)), a few units at most: +100 wins every token.
    if (k.favoured >= 0) w.f32()[p + "ffn.gate.bias"][k.favoured] += 100.0f;
    // Every matrix in its device format; the CPU gets its host dequantization.
    std::vector<QuantMatrix> held;
    held.reserve(3 * (k.experts + 1));
    auto add_expert = [&](const std::string& e, int64_t inter, MatrixFormat f) {
      auto make = [&](const std::string& name, int64_t rows, int64_t cols, float sd) {
        held.push_back(make_quant_matrix(f, rows, cols, sd));
        w.f32()[e + name] = held.back().values;
        return held.back().m;
      };
      // Large enough activations that the SwiGLU clamp at 10 engages for some channels.
      ExpertWeights x;
      x.w1 = make("w1.weight", inter, k.hidden, 8 * ws);
      x.w3 = make("w3.weight", inter, k.hidden, 8 * ws);
      x.w2 = make("w2.weight", k.hidden, inter, 1.0f / std::sqrt(float(inter)));
      return x;
    };
    const MatrixFormat routed = k.quantized ? MatrixFormat::kMxfp4 : MatrixFormat::kBf16;
    MoeArgs a;
    for (int e = 0; e < k.experts; ++e)
      a.experts.push_back(
          add_expert(p + "ffn.experts." + std::to_string(e) + ".", k.inter, routed));
    const ExpertWeights shared =
        add_expert(p + "ffn.shared_experts.", k.inter,
                   k.quantized ? MatrixFormat::kFp8Block : MatrixFormat::kBf16);
    const auto x = randn(k.tokens * k.hidden);
    std::vector<int32_t> ids(k.tokens, 0);
    v4::ModelContext m{c, w, v4::Numerics::kPlain, /*clamp_shared_expert=*/true, {}, {}};
    std::vector<float> want(k.tokens * k.hidden);
    v4::moe_forward(m, p, /*hash=*/false, x.data(), ids.data(), k.tokens, want.data());

    Gemm gemm;
    Linear linear(gemm);
    linear.reserve(k.hidden * k.inter);
    DeviceBuffer<ExpertWeights> dexperts(a.experts);
    DeviceBuffer<float> dx(x), dgw(w.f32()[p + "ffn.gate.weight"]),
        dbias(w.f32()[p + "ffn.gate.bias"]), dlogits(k.tokens * k.experts),
        dwts(k.tokens * k.top_k), dout(want.size());
    DeviceBuffer<int32_t> dsel(k.tokens * k.top_k);
    gemm.f32(dgw.get(), dx.get(), dlogits.get(), k.tokens, k.experts, k.hidden, nullptr);
    RoutingArgs r;
    r.logits = dlogits.get();
    r.bias = dbias.get();
    r.tokens = k.tokens;
    r.num_experts = k.experts;
    r.top_k = k.top_k;
    r.route_scale = 1.5f;
    route(r, dsel.get(), dwts.get(), nullptr);
    if (k.favoured >= 0) {
      const auto sel = dsel.download();
      for (int64_t t = 0; t < k.tokens; ++t) ASSERT_EQ(sel[t * k.top_k], k.favoured) << t;
    }
    a.x = dx.get();
    a.tokens = k.tokens;
    a.hidden = k.hidden;
    a.inter = k.inter;
    a.top_k = k.top_k;
    a.expert_ids = dsel.get();
    a.weights = dwts.get();
    a.device_experts = dexperts.get();
    a.expert_format = routed;
    a.num_experts = k.experts;
    a.shared = &shared;
    a.shared_inter = k.inter;
    a.swiglu_limit = 10.0f;
    a.out = dout.get();
    MoeRunner runner(linear);
    cudaStream_t stream = nullptr;
    DI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::printf("  moe %lld tokens, hidden %lld, inter %lld, %d experts, top %d%s%s:\n",
                (long long)k.tokens, (long long)k.hidden, (long long)k.inter, k.experts, k.top_k,
                k.favoured >= 0 ? ", skewed" : "",
                k.quantized ? ", MXFP4 experts + FP8 shared" : "");
    dout.poison();
    runner.run(a, nullptr);
    const auto got = dout.download();
    std::printf("   run():\n");
    EXPECT_TRUE(close(got, want, kBf16Tol));

    // Reserved for more tokens than used: a caller reserves its largest batch once.
    runner.reserve_grouped(k.tokens + 3, k.top_k, k.hidden, k.inter, k.inter, k.experts);
    // Every kernel form: CUDA cores (never the tensor-core form), tensor cores (always; MXFP4
    // prefill's gate-up on wgmma, decode's narrow case in the W4 GEMV form) and tensor cores
    // with the pipelined mma.sync kernels alone.
    for (int form_id = 0; form_id < 3; ++form_id) {
      const char* form = form_id == 0   ? "CUDA cores"
                         : form_id == 1 ? "tensor cores"
                                        : "tensor cores, mma.sync only";
      a.grouped_mma_min_tokens = a.grouped_w4_min_tokens = form_id == 0 ? int64_t{1} << 40 : 1;
      a.grouped_w4_wgmma = a.grouped_w4_gemv = form_id != 2;
      dout.poison();
      runner.run_grouped(a, nullptr);
      const auto grouped = dout.download();
      std::printf("   run_grouped() on %s:\n", form);
      EXPECT_TRUE(close(grouped, want, kBf16Tol)) << form;
      std::printf("   run_grouped() on %s against run():\n", form);
      EXPECT_TRUE(close(grouped, got, kBf16Tol)) << form;
      // The device grouping is a stable sort and every sum has a fixed order: bit-identical
      // reruns. The rerun is on a stream of its own, as the model runs it: PDL launches, and from
      // MOE_SHARED_OVERLAP_MIN_TOKENS to _MAX_TOKENS tokens (the 40 to 128-token cases) the shared
      // expert forked onto the runner's stream and joined before the combine.
      dout.poison();
      DI_CUDA_CHECK(cudaDeviceSynchronize());
      runner.run_grouped(a, stream);
      DI_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(dout.download(), grouped) << "run_grouped on " << form << " is not deterministic";
    }
    DI_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

}  // namespace
}  // namespace deepinfer::cuda
