// The DSpark drafter on the GPU (runtime/cuda/forward_v41/cuda_dspark.h) against the CPU's
// (model/deepseek_v41/dspark.h) on the quantized v41-dspark tiny model (issue 19): the same taps
// (the CPU forward's) absorbed, then proposals after several anchors. Each draft row's biased
// logits are held to logits_tolerance.h's relative L2 bound (bf16 GEMM operands) while the
// drafts so far agree; the first draft that differs must be a near-tie in the CPU's logits
// (its top two within kNearTie), since every later row reads it. The confidences follow.
#include "deepinfer/runtime/cuda/forward_v41/cuda_dspark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/dspark.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cuda/forward_v41/cuda_v41_model.h"
#include "logits_tolerance.h"

namespace deepinfer::cuda {
namespace {

// The gap between the two largest values of a row, over the largest magnitude.
double top2_gap(const float* v, int64_t n) {
  std::vector<float> s(v, v + n);
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
  double scale = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double(v[i])));
  return scale > 0 ? (double(s[0]) - s[1]) / scale : 0.0;
}

TEST(CudaDspark, ProposalsFollowTheCpuDrafter) {
  const std::string dir = v41::tiny_model_dir_for_test(/*quantized=*/true, "v41-dspark");
  auto cpu = v41::CpuModel::load(dir);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto drafter = v41::DsparkDrafter::create(**cpu);
  ASSERT_TRUE(drafter.ok()) << drafter.status().to_string();
  CudaModelOptions o;
  o.drafting = true;
  o.max_tokens = 256;
  auto gpu = CudaV41Model::load(dir, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  v41f::CudaDspark* d = (*gpu)->dspark();
  ASSERT_NE(d, nullptr) << "drafting asked for on a checkpoint with draft tensors";
  const int64_t V = (*cpu)->config().vocab_size;
  const int bs = d->block_size();

  // A prompt of 150 tokens (past the 128-row window), its taps from the CPU forward.
  std::vector<int32_t> ids(150);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(3 + (i * 7919) % 1000);
  v41::SequenceState st = (*cpu)->new_sequence();
  std::vector<float> logits, taps;
  ASSERT_TRUE((*cpu)->forward(st, ids.data(), int64_t(ids.size()), false, &logits, 0, &taps).ok());
  ASSERT_EQ(int64_t(taps.size()), int64_t(ids.size()) * d->tap_width());
  v41::DsparkState cs = (*drafter)->new_state();
  ASSERT_TRUE((*drafter)->absorb(cs, taps.data(), int64_t(ids.size())).ok());
  DeviceBuffer<float> rings(d->state_floats()), dtaps(taps);
  DI_CUDA_CHECK(cudaMemset(rings.get(), 0, d->state_floats() * 4));
  // In two calls (the window crosses its wrap in the second).
  ASSERT_TRUE(d->absorb(rings.get(), dtaps.get(), 100, 0).ok());
  ASSERT_TRUE(d->absorb(rings.get(), dtaps.get() + 100 * d->tap_width(), 50, 100).ok());

  int compared = 0;
  for (int32_t anchor : {5, 77, 901, 12345, 2}) {
    v41::DsparkProposal want, got;
    ASSERT_TRUE((*drafter)->propose(cs, anchor, &want).ok());
    ASSERT_TRUE(d->propose(rings.get(), int64_t(ids.size()), anchor, &got).ok());
    ASSERT_EQ(int(got.tokens.size()), bs);
    for (int i = 0; i < bs; ++i) {
      const double err = row_rel_l2(&got.logits[i * V], &want.logits[i * V], V);
      EXPECT_LE(err, kRowTol) << "anchor " << anchor << ", draft " << i;
      EXPECT_NEAR(got.confidence[i], want.confidence[i], 1e-3) << "anchor " << anchor << ", " << i;
      ++compared;
      if (got.tokens[i] != want.tokens[i]) {  // later rows read a different previous token
        EXPECT_LT(top2_gap(&want.logits[i * V], V), kNearTie)
            << "anchor " << anchor << ", draft " << i << ": " << got.tokens[i] << " vs "
            << want.tokens[i] << " with a clear gap";
        break;
      }
    }
  }
  std::printf("dspark: %d draft rows compared\n", compared);
  EXPECT_GE(compared, 15);
}

// The backbone's taps on the GPU (PagedSequence::taps) against the CPU forward's, row by row,
// prefill in two chunks then decode steps; and the drafter fed from them.
TEST(CudaDspark, BackboneTapsFollowTheCpusAndFeedTheDrafter) {
  const std::string dir = v41::tiny_model_dir_for_test(/*quantized=*/true, "v41-dspark");
  auto cpu = v41::CpuModel::load(dir);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  CudaModelOptions o;
  o.drafting = true;
  o.max_tokens = 256;
  o.max_chunk = 64;  // the prompt runs in three chunks
  auto gpu = CudaV41Model::load(dir, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  v41f::CudaDspark* d = (*gpu)->dspark();
  ASSERT_NE(d, nullptr);
  const int64_t TW = d->tap_width();
  std::vector<int32_t> ids(140);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(11 + (i * 104729) % 5000);
  const int64_t prompt = 130, n = int64_t(ids.size());
  v41::SequenceState st = (*cpu)->new_sequence();
  std::vector<float> logits, want;
  ASSERT_TRUE((*cpu)->forward(st, ids.data(), n, false, &logits, 0, &want).ok());

  std::vector<int32_t> pages((*gpu)->constant_pages() + (*gpu)->max_token_pages());
  for (size_t k = 0; k < pages.size(); ++k) pages[k] = static_cast<int32_t>(k);
  DeviceBuffer<float> taps(n * TW);
  PagedSequence q;
  q.constant_pages = pages.data();
  q.token_pages = pages.data() + (*gpu)->constant_pages();
  q.num_token_pages = (*gpu)->max_token_pages();
  q.taps = taps.get();
  ASSERT_TRUE((*gpu)->forward_paged(q, ids.data(), prompt, false, nullptr).ok());
  for (int64_t p = prompt; p < n; ++p) {
    q.num_tokens = p;
    q.taps = taps.get() + p * TW;
    ASSERT_TRUE((*gpu)->decode_paged(&q, &ids[p], 1, nullptr, nullptr).ok());
  }
  std::vector<float> got(n * TW);
  DI_CUDA_CHECK(cudaMemcpy(got.data(), taps.get(), got.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int64_t r = 0; r < n; ++r)
    worst = std::max(worst, row_rel_l2(&got[r * TW], &want[r * TW], TW));
  std::printf("dspark taps: worst row rel-L2 %.3g over %lld rows\n", worst, (long long)n);
  EXPECT_LE(worst, kRowTol);

  // The drafter from the GPU's taps against the CPU's from its own.
  auto drafter = v41::DsparkDrafter::create(**cpu);
  ASSERT_TRUE(drafter.ok()) << drafter.status().to_string();
  v41::DsparkState cs = (*drafter)->new_state();
  ASSERT_TRUE((*drafter)->absorb(cs, want.data(), n).ok());
  DeviceBuffer<float> rings(d->state_floats());
  DI_CUDA_CHECK(cudaMemset(rings.get(), 0, d->state_floats() * 4));
  ASSERT_TRUE(d->absorb(rings.get(), taps.get(), n, 0).ok());
  v41::DsparkProposal a, b;
  ASSERT_TRUE((*drafter)->propose(cs, 42, &a).ok());
  ASSERT_TRUE(d->propose(rings.get(), n, 42, &b).ok());
  const int64_t V = (*cpu)->config().vocab_size;
  EXPECT_LE(row_rel_l2(&b.logits[0], &a.logits[0], V), kRowTol);
  if (a.tokens[0] != b.tokens[0])
    EXPECT_LT(top2_gap(&a.logits[0], V), kNearTie) << b.tokens[0] << " vs " << a.tokens[0];
}

TEST(CudaDspark, NoDrafterWithoutDraftingOrDraftTensors) {
  CudaModelOptions o;
  o.max_tokens = 256;
  auto gpu = CudaV41Model::load(v41::tiny_model_dir_for_test(true, "v41-dspark"), o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  EXPECT_EQ((*gpu)->dspark(), nullptr);  // drafting not asked for
  o.drafting = true;
  auto plain = CudaV41Model::load(v41::tiny_model_dir_for_test(true), o);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ((*plain)->dspark(), nullptr);  // v41-default has no draft layers
}

}  // namespace
}  // namespace deepinfer::cuda
