// CUDA attention-side ops against the CPU reference at V4-Flash dims: sliding-window + sparse
// attention with sinks (decode and prefill), the indexer's scores and top-k, compressor pooling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "cuda_test_util.h"
#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/compressor/compressor_pool.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "paged_entries_fixture.h"

namespace deepinfer::cuda {
namespace {

using namespace deepinfer::cuda::testing;

struct AttnCase {
  int64_t pos0, T;
  int max_sel;
};

constexpr int kHeads = 64, kHeadDim = 512, kWindow = 128;

// Query t attends a varying count (up to max_sel) of random entries in [0, E).
struct Selection {
  std::vector<int32_t> sel, nsel;
};
Selection random_selection(const AttnCase& k, int64_t E) {
  Selection s{std::vector<int32_t>(k.T * std::max(1, k.max_sel), -1), std::vector<int32_t>(k.T)};
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(E - 1));
  for (int64_t t = 0; t < k.T; ++t) {
    s.nsel[t] = k.max_sel ? static_cast<int32_t>((t * 7 + k.max_sel) % (k.max_sel + 1)) : 0;
    for (int j = 0; j < s.nsel[t]; ++j) s.sel[t * k.max_sel + j] = pick(rng());
  }
  return s;
}

// The CPU reference per (query, head): the window's keys key_at(p), then the selected entries.
template <typename KeyAt>
std::vector<float> cpu_sink(const AttnCase& k, const std::vector<float>& q,
                            const std::vector<float>& sinks, KeyAt key_at,
                            const std::vector<float>& entries, const Selection& s) {
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  std::vector<float> want(k.T * kHeads * kHeadDim);
  for (int64_t t = 0; t < k.T; ++t) {
    const int64_t pos = k.pos0 + t;
    std::vector<const float*> keys;
    for (int64_t p = std::max<int64_t>(0, pos - (kWindow - 1)); p <= pos; ++p)
      keys.push_back(key_at(p));
    for (int j = 0; j < s.nsel[t]; ++j)
      keys.push_back(&entries[s.sel[t * k.max_sel + j] * kHeadDim]);
    for (int h = 0; h < kHeads; ++h)
      cpu::sink_attention(&q[(t * kHeads + h) * kHeadDim], keys.data(),
                          static_cast<int64_t>(keys.size()), sinks[h], kHeadDim, scale,
                          &want[(t * kHeads + h) * kHeadDim]);
  }
  return want;
}

// `a` with each kernel into `out`, against the CPU's `want`: fp32 on CUDA cores, and bf16 tensor
// cores (Q, K and the probabilities rounded to bf16, so the bf16 tolerance).
// Every kernel against the CPU: fp32, its split over chunks of keys (scratch reserved for this
// launch), tensor cores.
void expect_every_kernel(SinkAttentionArgs a, DeviceBuffer<float>& out,
                         const std::vector<float>& want, const std::string& what) {
  DeviceBuffer<float> partials(
      sink_split_floats(a.num_queries, a.num_heads, a.head_dim, a.window + a.max_selected));
  partials.poison();  // the merge must read only what the partial kernel wrote
  a.split_partials = partials.get();
  a.split_partials_floats = static_cast<int64_t>(partials.size());
  for (auto [kernel, tol, name] : {std::tuple{SinkKernel::kFp32, kF32Tol, " fp32"},
                                   std::tuple{SinkKernel::kSplit, kF32Tol, " split"},
                                   std::tuple{SinkKernel::kTensorCores, kBf16Tol, " mma"}}) {
    out.poison();
    a.kernel = kernel;
    a.out = out.get();
    sink_attention(a, nullptr);
    EXPECT_TRUE(close(out.download(), want, tol)) << what << name;
  }
}

// One sequence's launch over device copies of q, sinks and the selection; the caller's `set`
// fills in where the keys are (ring, fresh, entries), then the output is compared with want.
template <typename SetKeys>
void expect_one_sequence(const AttnCase& k, const std::vector<float>& q,
                         const std::vector<float>& sinks, const Selection& s,
                         const std::vector<float>& want, SetKeys set) {
  DeviceBuffer<float> dq(q), dsinks(sinks), dout(want.size());
  DeviceBuffer<int32_t> dsel(s.sel), dnsel(s.nsel);
  dout.poison();
  SinkAttentionArgs a;
  a.q = dq.get();
  a.selected = dsel.get();
  a.num_selected = dnsel.get();
  a.max_selected = k.max_sel;
  a.sinks = dsinks.get();
  a.out = dout.get();
  a.num_queries = k.T;
  a.pos0 = k.pos0;
  a.num_heads = kHeads;
  a.head_dim = kHeadDim;
  a.window = kWindow;
  a.scale = 1.0f / std::sqrt(float(kHeadDim));
  set(a);
  expect_every_kernel(a, dout, want,
                      "pos0 " + std::to_string(k.pos0) + " T " + std::to_string(k.T));
}

TEST(CudaSinkAttention, MatchesCpuInDecodeAndPrefillAtV4FlashDims) {
  const int hd = kHeadDim;
  for (AttnCase k : {AttnCase{5, 1, 0}, AttnCase{1000, 1, 512}, AttnCase{0, 37, 0},
                     AttnCase{300, 37, 75}, AttnCase{4095, 3, 512}}) {
    const int64_t R = kWindow - 1 + k.T;  // ring rows: the chunk's positions are in the ring
    const int64_t E = std::max<int64_t>(1, (k.pos0 + k.T) / 4);
    const auto q = randn(k.T * kHeads * hd), ring = randn(R * hd), entries = randn(E * hd);
    const auto sinks = randn(kHeads);
    const Selection s = random_selection(k, E);
    const auto want = cpu_sink(
        k, q, sinks, [&](int64_t p) { return &ring[(p % R) * hd]; }, entries, s);
    DeviceBuffer<float> dring(ring), dent(entries);
    expect_one_sequence(k, q, sinks, s, want, [&](SinkAttentionArgs& a) {
      a.ring = dring.get();
      a.ring_rows = R;
      a.entries = contiguous_entries(dent.get(), hd);
    });
  }
}

// The forward's prefill form: the ring holds only the window before the chunk (window rows),
// the chunk's own keys come from `fresh`, the entries from shuffled pages.
TEST(CudaSinkAttention, FreshChunkKeysAndPagedEntriesMatchCpu) {
  const int hd = kHeadDim, W = kWindow;
  for (AttnCase k : {AttnCase{0, 37, 0}, AttnCase{300, 37, 75}, AttnCase{1000, 1, 250},
                     AttnCase{129, 200, 40}, AttnCase{3968, 128, 512}}) {
    // Every position's key, as the CPU sees them; the ring gets those before pos0.
    const auto keys_at = randn((k.pos0 + k.T) * hd);
    std::vector<float> ring(W * hd, NAN);  // rows never written must never be read
    for (int64_t p = std::max<int64_t>(0, k.pos0 - W); p < k.pos0; ++p)
      std::copy_n(keys_at.begin() + p * hd, hd, ring.begin() + (p % W) * hd);
    const std::vector<float> fresh(keys_at.begin() + k.pos0 * hd, keys_at.end());
    const int64_t E = std::max<int64_t>(1, (k.pos0 + k.T) / 4);
    const auto entries = randn(E * hd), q = randn(k.T * kHeads * hd), sinks = randn(kHeads);
    const Selection s = random_selection(k, E);
    const auto want = cpu_sink(
        k, q, sinks, [&](int64_t p) { return &keys_at[p * hd]; }, entries, s);
    const PagedEntriesFixture paged({entries}, hd, 4, 128);
    DeviceBuffer<float> dring(ring), dfresh(fresh);
    expect_one_sequence(k, q, sinks, s, want, [&](SinkAttentionArgs& a) {
      a.fresh = dfresh.get();
      a.ring = dring.get();
      a.ring_rows = W;
      a.entries = paged.view();
    });
  }
}

// The fp32 kernel groups 16, 8, 4, 2 or 1 heads per block by the launch's query count (wide
// groups for prefill and large batches, one head per block for a single query); the tensor-core
// kernel runs a block per query. With either, a query's output must be the same bits whichever
// width its launch took: 70 queries at once against each launched alone, every position in the
// ring. kAuto takes the tensor cores for the 70 (at least kSinkMmaMinQueries): the same bits as
// asking for them.
TEST(CudaSinkAttention, AQuerysOutputIsTheSameBitsAloneAndInAWideLaunch) {
  const int hd = kHeadDim;
  const AttnCase k{900, 70, 512};
  const int64_t R = kWindow - 1 + k.T;
  const int64_t E = (k.pos0 + k.T) / 4;
  const auto q = randn(k.T * kHeads * hd), ring = randn(R * hd), entries = randn(E * hd);
  const auto sinks = randn(kHeads);
  const Selection s = random_selection(k, E);
  DeviceBuffer<float> dq(q), dsinks(sinks), dring(ring), dent(entries);
  DeviceBuffer<int32_t> dsel(s.sel), dnsel(s.nsel);
  SinkAttentionArgs a;
  a.q = dq.get();
  a.ring = dring.get();
  a.ring_rows = R;
  a.entries = contiguous_entries(dent.get(), hd);
  a.selected = dsel.get();
  a.num_selected = dnsel.get();
  a.max_selected = k.max_sel;
  a.sinks = dsinks.get();
  a.num_queries = k.T;
  a.pos0 = k.pos0;
  a.num_heads = kHeads;
  a.head_dim = hd;
  a.window = kWindow;
  a.scale = 1.0f / std::sqrt(float(hd));
  const auto differing = [](const std::vector<float>& x, const std::vector<float>& y) {
    size_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) differ += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
    return differ;
  };
  std::vector<float> mma_wide, split_alone;
  DeviceBuffer<float> partials(sink_split_floats(k.T, kHeads, hd, kWindow + k.max_sel));
  partials.poison();
  a.split_partials = partials.get();
  a.split_partials_floats = static_cast<int64_t>(partials.size());
  for (SinkKernel kernel : {SinkKernel::kFp32, SinkKernel::kSplit, SinkKernel::kTensorCores}) {
    const char* name = kernel == SinkKernel::kFp32    ? " fp32"
                       : kernel == SinkKernel::kSplit ? " split"
                                                      : " mma";
    DeviceBuffer<float> wide(k.T * kHeads * hd), alone(k.T * kHeads * hd);
    wide.poison();
    alone.poison();
    a.kernel = kernel;
    a.out = wide.get();
    sink_attention(a, nullptr);
    for (int64_t t = 0; t < k.T; ++t) {
      SinkAttentionArgs one = a;
      one.q = dq.get() + t * kHeads * hd;
      one.selected = dsel.get() + t * k.max_sel;
      one.num_selected = dnsel.get() + t;
      one.num_queries = 1;
      one.pos0 = k.pos0 + t;
      one.out = alone.get() + t * kHeads * hd;
      sink_attention(one, nullptr);
    }
    const auto w = wide.download(), o = alone.download();
    EXPECT_EQ(differing(w, o), 0u) << "of " << w.size() << " outputs" << name;
    if (kernel == SinkKernel::kTensorCores) mma_wide = w;
    if (kernel == SinkKernel::kSplit) split_alone = o;
  }
  // Up to kSinkSplitMaxQueries queries, with the scratch reserved, kAuto is the split kernel.
  {
    DeviceBuffer<float> few(kHeads * hd);
    few.poison();
    SinkAttentionArgs one = a;
    one.kernel = SinkKernel::kAuto;
    one.num_queries = 1;
    one.out = few.get();
    sink_attention(one, nullptr);
    EXPECT_EQ(differing(few.download(),
                        std::vector<float>(split_alone.begin(), split_alone.begin() + kHeads * hd)),
              0u)
        << "kAuto at one query";
  }
  DeviceBuffer<float> automatic(k.T * kHeads * hd);
  automatic.poison();
  a.kernel = SinkKernel::kAuto;
  a.out = automatic.get();
  sink_attention(a, nullptr);
  EXPECT_EQ(differing(automatic.download(), mma_wide), 0u) << "kAuto at " << k.T << " queries";
}

TEST(CudaIndexer, ScoresMatchCpuAtV4FlashDims) {
  const int ih = 64, ihd = 128;
  for (auto [pos0, T] : {std::pair<int64_t, int64_t>{4000, 5}, {0, 16}, {131, 9}}) {
    const int64_t E = (pos0 + T) / 4;
    const auto q = randn(T * ih * ihd), w = randn(T * ih), keys = randn(E * ihd);
    const float wscale = 1.0f / 8.0f, sscale = 1.0f / std::sqrt(128.0f);
    DeviceBuffer<float> dq(q), dw(w), dk(keys), ds(T * std::max<int64_t>(E, 1));
    ds.poison();
    IndexerArgs a;
    a.q = dq.get();
    a.w = dw.get();
    a.keys = contiguous_entries(dk.get(), ihd);
    a.num_queries = T;
    a.pos0 = pos0;
    a.num_entries = E;
    a.num_heads = ih;
    a.head_dim = ihd;
    a.weight_scale = wscale;
    a.score_scale = sscale;
    indexer_scores(a, ds.get(), nullptr);
    const auto got = ds.download();
    std::vector<float> g, want;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < (pos0 + t + 1) / 4; ++e) {  // only visible entries are written
        g.push_back(got[t * E + e]);
        want.push_back(cpu::indexer_score(&q[t * ih * ihd], &w[t * ih], &keys[e * ihd], ih, ihd,
                                          wscale, sscale));
      }
    EXPECT_TRUE(close(g, want, kF32Tol)) << "pos0 " << pos0;
  }
}

// Dims off the tensor-core kernel's tiles (heads and dims not multiples of 8; 18-float rows take
// the unaligned loads) and past its limits (80 heads: the fp32 kernel), against the CPU; and each
// query launched alone gives the bits it got among 40.
TEST(CudaIndexer, ScoresMatchCpuAtOtherDimsAndAreTheSameAloneAsInABatch) {
  struct Dims {
    int ih, ihd;
  };
  for (const Dims d : {Dims{64, 128}, Dims{12, 18}, Dims{5, 20}, Dims{80, 128}}) {
    const int64_t pos0 = 300, T = 40, E = (pos0 + T) / 4;
    const auto q = randn(T * d.ih * d.ihd), w = randn(T * d.ih), keys = randn(E * d.ihd);
    const float wscale = 1.0f / std::sqrt(float(d.ih)), sscale = 1.0f / std::sqrt(float(d.ihd));
    DeviceBuffer<float> dq(q), dw(w), dk(keys), ds(T * E), alone(T * E);
    ds.poison();
    alone.poison();
    IndexerArgs a;
    a.q = dq.get();
    a.w = dw.get();
    a.keys = contiguous_entries(dk.get(), d.ihd);
    a.num_queries = T;
    a.pos0 = pos0;
    a.num_entries = E;
    a.num_heads = d.ih;
    a.head_dim = d.ihd;
    a.weight_scale = wscale;
    a.score_scale = sscale;
    indexer_scores(a, ds.get(), nullptr);
    for (int64_t t = 0; t < T; ++t) {
      IndexerArgs one = a;
      one.q = dq.get() + t * d.ih * d.ihd;
      one.w = dw.get() + t * d.ih;
      one.num_queries = 1;
      one.pos0 = pos0 + t;
      indexer_scores(one, alone.get() + t * E, nullptr);
    }
    const auto got = ds.download(), solo = alone.download();
    std::vector<float> g, want;
    size_t differ = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < (pos0 + t + 1) / 4; ++e) {
        g.push_back(got[t * E + e]);
        want.push_back(cpu::indexer_score(&q[t * d.ih * d.ihd], &w[t * d.ih], &keys[e * d.ihd],
                                          d.ih, d.ihd, wscale, sscale));
        differ += std::memcmp(&got[t * E + e], &solo[t * E + e], sizeof(float)) != 0;
      }
    EXPECT_TRUE(close(g, want, kF32Tol)) << d.ih << " heads of " << d.ihd;
    EXPECT_EQ(differ, 0u) << d.ih << " heads of " << d.ihd << ": scores alone vs in a batch";
  }
}

// The CPU's scores go in, so the choice must match exactly, ties included.
TEST(CudaIndexer, TopKMatchesCpuExactlyWithTiesToTheEarlierEntry) {
  for (auto [pos0, T, topk, levels] : {std::tuple<int64_t, int64_t, int, int>{4000, 3, 512, 0},
                                       {0, 40, 512, 0},
                                       {600, 4, 512, 3},
                                       {65532, 2, 512, 0},
                                       {65532, 2, 512, 5},
                                       {99, 6, 7, 2}}) {
    const int64_t E = (pos0 + T) / 4;
    auto scores = randn(T * E);
    if (levels)  // few distinct values (like ReLU zeros): mostly ties
      for (auto& s : scores) s = std::floor(std::fabs(s) * levels) * (s > 0 ? 1.0f : 0.0f);
    DeviceBuffer<float> ds(scores);
    DeviceBuffer<int32_t> dsel(T * topk), dn(T);
    dsel.poison();
    dn.poison();
    indexer_topk(ds.get(), T, E, pos0, 4, topk, dsel.get(), dn.get(), nullptr);
    const auto sel = dsel.download(), n = dn.download();
    for (int64_t t = 0; t < T; ++t) {
      const int64_t visible = (pos0 + t + 1) / 4;
      const auto want = cpu::top_k_indices(&scores[t * E], visible, topk);
      ASSERT_EQ(n[t], static_cast<int32_t>(want.size())) << "query " << t;
      for (int i = 0; i < topk; ++i) {
        const int32_t expect = i < n[t] ? static_cast<int32_t>(want[i]) : -1;
        ASSERT_EQ(sel[t * topk + i], expect) << "query " << t << " slot " << i;
      }
    }
  }
}

// Past one block's sort (16,384 visible entries) the top-k runs in chunks and a merge: the same
// choice as the CPU's, ties across chunk boundaries included, for one sequence and batched rows.
TEST(CudaIndexer, ChunkedTopKMatchesCpuPastOneBlocksSort) {
  const int ratio = 1, topk = 512;
  ASSERT_GE(indexer_topk_capacity(topk), 100000);
  for (int levels : {0, 3}) {
    const int64_t pos0 = 70000, T = 3, E = (pos0 + T) / ratio;
    auto scores = randn(T * E);
    if (levels)  // few distinct values: ties everywhere, across chunks too
      for (auto& s : scores) s = std::floor(std::fabs(s) * levels) * (s > 0 ? 1.0f : 0.0f);
    DeviceBuffer<float> ds(scores);
    DeviceBuffer<int32_t> dsel(T * topk), dn(T);
    dsel.poison();
    dn.poison();
    indexer_topk_reserve(T, E, topk);
    indexer_topk(ds.get(), T, E, pos0, ratio, topk, dsel.get(), dn.get(), nullptr);
    const auto sel = dsel.download(), n = dn.download();
    for (int64_t t = 0; t < T; ++t) {
      const int64_t visible = (pos0 + t + 1) / ratio;
      const auto want = cpu::top_k_indices(&scores[t * E], visible, topk);
      ASSERT_EQ(n[t], static_cast<int32_t>(want.size())) << "query " << t;
      for (int i = 0; i < topk; ++i)
        ASSERT_EQ(sel[t * topk + i], i < n[t] ? static_cast<int32_t>(want[i]) : -1)
            << "levels " << levels << " query " << t << " slot " << i;
    }
    // The same rows as batched decode rows at their own positions (one padding row).
    const std::vector<int64_t> pos = {pos0, 20000, 0, pos0 + 2};
    const std::vector<int32_t> seq = {0, 1, -1, 2};
    std::vector<float> rows(4 * E, 0.0f);
    for (int b = 0; b < 4; ++b)
      std::copy(&scores[(b == 3   ? 2
                         : b == 1 ? 1
                                  : 0) *
                        E],
                &scores[(b == 3   ? 2
                         : b == 1 ? 1
                                  : 0) *
                        E] +
                    E,
                &rows[b * E]);
    DeviceBuffer<float> dr(rows);
    DeviceBuffer<int64_t> dpos(pos);
    DeviceBuffer<int32_t> dseq(seq), dsel4(4 * topk), dn4(4);
    indexer_topk_reserve(4, E, topk);
    indexer_topk_rows(dr.get(), 4, E, dpos.get(), dseq.get(), ratio, topk, dsel4.get(), dn4.get(),
                      nullptr);
    const auto sel4 = dsel4.download(), n4 = dn4.download();
    for (int b = 0; b < 4; ++b) {
      const int64_t visible = seq[b] < 0 ? 0 : (pos[b] + 1) / ratio;
      const auto want = cpu::top_k_indices(&rows[b * E], visible, topk);
      ASSERT_EQ(n4[b], static_cast<int32_t>(want.size())) << "row " << b;
      for (int i = 0; i < topk; ++i)
        ASSERT_EQ(sel4[b * topk + i], i < n4[b] ? static_cast<int32_t>(want[i]) : -1)
            << "levels " << levels << " row " << b << " slot " << i;
    }
  }
}

// Batched decode: each query belongs to its own sequence (own ring, own position) reached through
// device pointer tables, its entries through its row of the block tables (pages shuffled); a
// padding row (sequence -1) outputs zeros.
TEST(CudaSinkAttention, BatchedRowsMatchCpuPerSequenceAtV4FlashDims) {
  const int nh = 64, hd = 512, W = 128, max_sel = 64;
  const float scale = 1.0f / std::sqrt(512.0f);
  const std::vector<int64_t> pos = {3, 700, 4095, 129};
  const std::vector<int32_t> seq_of = {2, 0, -1, 1, 3};  // query -> sequence
  const int64_t S = 4, T = static_cast<int64_t>(seq_of.size()), R = W - 1 + 4;
  const int64_t E = 4096 / 4;
  std::vector<std::vector<float>> rings, entries;
  std::vector<DeviceBuffer<float>> dring;
  for (int64_t k = 0; k < S; ++k) {
    rings.push_back(randn(R * hd));
    entries.push_back(randn(E * hd));
    dring.emplace_back(rings.back());
  }
  const auto q = randn(T * nh * hd), sinks = randn(nh);
  std::vector<int32_t> sel(T * max_sel, -1), nsel(T, 0);
  std::vector<int64_t> qpos(T, 0);
  for (int64_t t = 0; t < T; ++t) {
    if (seq_of[t] < 0) continue;
    qpos[t] = pos[seq_of[t]];
    const int64_t visible = (qpos[t] + 1) / 4;
    nsel[t] = static_cast<int32_t>(std::min<int64_t>(max_sel, visible));
    for (int j = 0; j < nsel[t]; ++j) sel[t * max_sel + j] = static_cast<int32_t>(visible - 1 - j);
  }
  std::vector<float> want(T * nh * hd, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    if (seq_of[t] < 0) continue;
    const auto& ring = rings[seq_of[t]];
    const auto& ent = entries[seq_of[t]];
    std::vector<const float*> keys;
    for (int64_t p = std::max<int64_t>(0, qpos[t] - (W - 1)); p <= qpos[t]; ++p)
      keys.push_back(&ring[(p % R) * hd]);
    for (int j = 0; j < nsel[t]; ++j) keys.push_back(&ent[sel[t * max_sel + j] * hd]);
    for (int h = 0; h < nh; ++h)
      cpu::sink_attention(&q[(t * nh + h) * hd], keys.data(), static_cast<int64_t>(keys.size()),
                          sinks[h], hd, scale, &want[(t * nh + h) * hd]);
  }
  std::vector<const float*> ring_ptrs;
  for (int64_t k = 0; k < S; ++k) ring_ptrs.push_back(dring[k].get());
  DeviceBuffer<const float*> drp(ring_ptrs);
  const PagedEntriesFixture paged(entries, hd, 4, 128);
  DeviceBuffer<float> dq(q), dsinks(sinks), dout(want.size());
  DeviceBuffer<int32_t> dsel(sel), dnsel(nsel), dseq(seq_of);
  DeviceBuffer<int64_t> dpos(qpos);
  dout.poison();
  SinkAttentionArgs a;
  a.q = dq.get();
  a.ring_rows = R;
  a.selected = dsel.get();
  a.num_selected = dnsel.get();
  a.max_selected = max_sel;
  a.sinks = dsinks.get();
  a.out = dout.get();
  a.num_queries = T;
  a.num_heads = nh;
  a.head_dim = hd;
  a.window = W;
  a.scale = scale;
  a.query_seq = dseq.get();
  a.positions = dpos.get();
  a.rings = drp.get();
  a.entries = paged.view();
  expect_every_kernel(a, dout, want, "batched rows");
}

// Batched decode: per-query sequence, position and keys; scores rows strided by the capacity
// bound, top-k over each row's own visible count; a padding row selects nothing.
TEST(CudaIndexer, BatchedRowsMatchCpuPerSequence) {
  const int ih = 64, ihd = 128, topk = 512;
  const int64_t bound = 4096 / 4;
  const std::vector<int64_t> pos = {4095, 2, 1500};
  const std::vector<int32_t> seq_of = {1, -1, 2, 0};
  const int64_t T = static_cast<int64_t>(seq_of.size());
  std::vector<std::vector<float>> keys;
  for (size_t k = 0; k < pos.size(); ++k) {
    keys.push_back(randn(bound * ihd));
  }
  const auto q = randn(T * ih * ihd), w = randn(T * ih);
  const float wscale = 1.0f / 8.0f, sscale = 1.0f / std::sqrt(128.0f);
  std::vector<int64_t> qpos(T, 0);
  for (int64_t t = 0; t < T; ++t) qpos[t] = seq_of[t] < 0 ? 0 : pos[seq_of[t]];
  DeviceBuffer<float> dq(q), dw(w), ds(T * bound);
  const PagedEntriesFixture paged(keys, ihd, 4, 128);
  DeviceBuffer<int32_t> dseq(seq_of), dsel(T * topk), dn(T);
  DeviceBuffer<int64_t> dpos(qpos);
  ds.poison();
  dsel.poison();
  dn.poison();
  IndexerArgs a;
  a.q = dq.get();
  a.w = dw.get();
  a.num_queries = T;
  a.num_entries = bound;
  a.num_heads = ih;
  a.head_dim = ihd;
  a.weight_scale = wscale;
  a.score_scale = sscale;
  a.query_seq = dseq.get();
  a.positions = dpos.get();
  a.keys = paged.view();
  indexer_scores(a, ds.get(), nullptr);
  indexer_topk_rows(ds.get(), T, bound, dpos.get(), dseq.get(), 4, topk, dsel.get(), dn.get(),
                    nullptr);
  const auto got = ds.download();
  const auto sel = dsel.download(), n = dn.download();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t visible = seq_of[t] < 0 ? 0 : (qpos[t] + 1) / 4;
    std::vector<float> g, want;
    for (int64_t e = 0; e < visible; ++e) {
      g.push_back(got[t * bound + e]);
      want.push_back(cpu::indexer_score(&q[t * ih * ihd], &w[t * ih], &keys[seq_of[t]][e * ihd], ih,
                                        ihd, wscale, sscale));
    }
    EXPECT_TRUE(close(g, want, kF32Tol)) << "query " << t;
    // The top-k of the GPU's own scores (the CPU's choice over them must match exactly).
    const auto pick = cpu::top_k_indices(g.data(), visible, topk);
    ASSERT_EQ(n[t], static_cast<int32_t>(pick.size())) << "query " << t;
    for (int i = 0; i < topk; ++i)
      ASSERT_EQ(sel[t * topk + i], i < n[t] ? static_cast<int32_t>(pick[i]) : -1)
          << "query " << t << " slot " << i;
  }
}

TEST(CudaCompressorPool, MatchesCpuForCsaHcaAndIndexerWindows) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (auto [windows, rows, dim, first_half_empty] :
       {std::tuple<int64_t, int, int, bool>{9, 8, 512, false},
        {3, 8, 512, true},
        {5, 128, 512, false},
        {11, 8, 128, false}}) {
    const auto kv = randn(windows * rows * dim);
    auto gate = randn(windows * rows * dim, 2.0f);
    // CSA's first window: no previous A-halves, their gates are -inf.
    if (first_half_empty)
      for (int64_t w = 0; w < windows; ++w)
        std::fill(&gate[w * rows * dim], &gate[w * rows * dim] + (rows / 2) * dim, ninf);
    std::vector<float> want(windows * dim);
    for (int64_t w = 0; w < windows; ++w) {
      std::vector<const float*> kr, gr;
      for (int j = 0; j < rows; ++j) {
        kr.push_back(&kv[(w * rows + j) * dim]);
        gr.push_back(&gate[(w * rows + j) * dim]);
      }
      cpu::softmax_pool(kr.data(), gr.data(), rows, dim, &want[w * dim]);
    }
    DeviceBuffer<float> dkv(kv), dg(gate), dout(want.size());
    dout.poison();
    compressor_pool(dkv.get(), dg.get(), windows, rows, dim, dout.get(), nullptr);
    EXPECT_TRUE(close(dout.download(), want, kF32Tol)) << rows << " rows of " << dim;
  }
}

}  // namespace
}  // namespace deepinfer::cuda
