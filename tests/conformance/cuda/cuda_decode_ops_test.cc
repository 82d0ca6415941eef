// The batched-decode compressor (forward/decode_kernels.h) against the CPU model's own
// compressor_forward, token by token: several sequences at staggered positions in one batch with
// a padding row, for CSA (overlapping windows, head_dim 512), the CSA indexer's keys (128) and
// HCA (ratio 128), the GPU's state in shuffled pages of the shared StateLayout. Both sides get the
// same projected kv/gate (cpu::linear), so only the compressor's pooling, norm, RoPE and state
// bookkeeping are compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "cuda_test_util.h"
#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "deepinfer/model/deepseek_v4/rope.h"
#include "deepinfer/runtime/cuda/forward/decode_kernels.h"
#include "deepinfer/runtime/cuda/forward/paged_state.h"

namespace deepinfer::cuda {
namespace {

using namespace deepinfer::cuda::testing;

struct CompressorCase {
  int ratio;
  bool indexer;
  int64_t tokens;  // per sequence
};

TEST(CudaDecodeCompressor, MatchesCpuCompressorTokenByToken) {
  for (CompressorCase k : {CompressorCase{4, false, 23}, CompressorCase{4, true, 23},
                           CompressorCase{128, false, 300}}) {
    v4::Config c;
    c.hidden_size = 64;
    c.num_layers = 1;
    c.head_dim = 512;
    c.rope_dim = 64;
    c.index_head_dim = 128;
    c.sliding_window = 128;
    c.compress_ratios = {k.ratio};
    c.yarn.enabled = true;
    c.yarn.factor = 16;
    c.yarn.original_max_position_embeddings = 65536;
    const int dim = k.indexer ? c.index_head_dim : c.head_dim;
    const int width = k.ratio == 4 ? 2 * dim : dim;
    const int64_t H = c.hidden_size;
    const std::string base =
        std::string("layers.0.") + (k.indexer ? "attn.indexer.compressor." : "attn.compressor.");
    v4::Weights w;
    w.f32()[base + "wkv.weight"] = randn(width * H, 0.3f);
    w.f32()[base + "wgate.weight"] = randn(width * H, 0.3f);
    w.f32()[base + "ape"] = randn(k.ratio * width, 0.5f);
    w.f32()[base + "norm.weight"] = randn(dim, 1.0f);
    v4::ModelContext m{c,
                       w,
                       v4::Numerics::kPlain,
                       true,
                       v4::RopeTable(c.rope_theta, c.rope_dim, nullptr),
                       v4::RopeTable(c.compress_rope_theta, c.rope_dim, &c.yarn)};

    // Sequence s starts at step 3 * s; row 3 of every step is padding.
    const int S = 3, B = S + 1;
    const int64_t steps = k.tokens + 3 * (S - 1);
    std::vector<v4::SequenceState> cpu;
    for (int s = 0; s < S; ++s) cpu.push_back(v4::make_sequence_state(c));
    // Pages of 16 tokens, so entries spread over many; every sequence's pages shuffled.
    PagedState state(c, 16, k.tokens, B);
    const int64_t C = state.layout().constant_pages(), T = state.max_token_pages();
    state.allocate(S * (C + T));
    std::vector<int32_t> ids(S * (C + T));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng());
    std::vector<PagedSequence> seqs(S);
    for (int s = 0; s < S; ++s) {
      seqs[s].constant_pages = &ids[s * (C + T)];
      seqs[s].token_pages = &ids[s * (C + T) + C];
      seqs[s].num_token_pages = T;
      state.reset(seqs[s], nullptr);
    }
    state.stage_rows(seqs.data(), S, nullptr);  // row s is sequence s
    const LayerSlots& ls = state.layer_slots(0);
    DeviceBuffer<float> dape(w.f32()[base + "ape"]), dnorm(w.f32()[base + "norm.weight"]);
    DeviceBuffer<double> dfreq(m.compress_rope.inv_freq());
    DeviceBuffer<float> dkv(B * width), dgate(B * width);
    DeviceBuffer<int32_t> dslot(B);
    DeviceBuffer<int64_t> dpos(B);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t j = 0; j < steps; ++j) {
      // Inactive rows (and the padding row) carry NaN: reading them would poison an entry.
      std::vector<float> kv(B * width, nan), gate(B * width, nan);
      std::vector<int32_t> slot(B, -1);
      std::vector<int64_t> pos(B, 0);
      for (int s = 0; s < S; ++s) {
        const int64_t p = j - 3 * s;
        if (p < 0 || p >= k.tokens) continue;
        const auto h = randn(H);
        v4::CompressorState& st = k.indexer ? cpu[s].layers[0].index : cpu[s].layers[0].comp;
        v4::compressor_forward(m, "layers.0.", k.indexer, st, h.data(), 1, p);
        cpu::linear(w.f32()[base + "wkv.weight"].data(), width, H, h.data(), 1, &kv[s * width]);
        cpu::linear(w.f32()[base + "wgate.weight"].data(), width, H, h.data(), 1, &gate[s * width]);
        slot[s] = s;
        pos[s] = p;
      }
      dkv.upload(kv);
      dgate.upload(gate);
      dslot.upload(slot);
      dpos.upload(pos);
      DecodeCompressorArgs a;
      a.kv = dkv.get();
      a.gate = dgate.get();
      a.ape = dape.get();
      a.norm = dnorm.get();
      a.inv_freq = dfreq.get();
      a.eps = static_cast<float>(c.rms_norm_eps);
      a.ratio = k.ratio;
      a.width = width;
      a.dim = dim;
      a.rope_dim = c.rope_dim;
      a.state = k.indexer ? ls.index : ls.comp;
      decode_compressor(a, DecodeRows{dslot.get(), dpos.get(), B}, nullptr);
    }
    for (int s = 0; s < S; ++s) {
      const v4::CompressorState& st = k.indexer ? cpu[s].layers[0].index : cpu[s].layers[0].comp;
      const int64_t n = st.num_entries();
      ASSERT_EQ(n, k.tokens / k.ratio);
      std::vector<float> want;
      for (int64_t e = 0; e < n; ++e) want.insert(want.end(), st.entries[e], st.entries[e] + dim);
      // Each entry read back from where the CPU's StateLayout places it.
      const v4::CompressorLayout& cl =
          k.indexer ? state.layout().layers()[0].index : state.layout().layers()[0].comp;
      std::vector<float> got(n * dim);
      for (int64_t e = 0; e < n; ++e) {
        int64_t page = 0, offset = 0;
        state.layout().entry_place(cl, e, &page, &offset);
        ASSERT_EQ(cudaMemcpy(&got[e * dim], state.page(seqs[s].token_pages[page]) + offset,
                             dim * sizeof(float), cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      std::printf("  ratio %d%s, sequence %d, %lld entries:\n", k.ratio,
                  k.indexer ? " (indexer)" : "", s, static_cast<long long>(n));
      EXPECT_TRUE(close(got, want, kF32Tol));
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda
