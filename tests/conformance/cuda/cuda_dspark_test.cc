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
#include "deepinfer/model/deepseek_v41/sequence_state.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cuda/forward_v41/cuda_v41_model.h"
#include "logits_tolerance.h"
#include "v41_compare.h"

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
      // The confidence is a sigmoid of one dot product over the un-normed hidden row, where
      // cancellation magnifies the bf16 GEMM error the logits bound allows (it rates drafts,
      // nothing reads it to pick one): within 0.02 (a gate logit within ~0.08).
      EXPECT_NEAR(got.confidence[i], want.confidence[i], 0.02) << "anchor " << anchor << ", " << i;
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

// The backbone's taps on the GPU (PagedSequence::taps) against the CPU forward's, as
// cuda_v41_test compares logits (v41_compare.h): from the CPU's own state, a prefill chunk that
// crosses the window and decode steps, each row's taps (the tap layers' stream means) held by
// V4.1's near-tie rule against the CPU's with bf16 operands.
TEST(CudaDspark, BackboneTapsFollowTheCpus) {
  const std::string dir = v41::tiny_model_dir_for_test(/*quantized=*/true, "v41-dspark");
  auto cpu = v41::CpuModel::load(dir);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  CudaModelOptions o;
  o.drafting = true;
  o.max_tokens = 256;
  o.max_chunk = 64;
  o.max_sequences = 4;
  auto gpu = CudaV41Model::load(dir, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  v41f::CudaDspark* d = (*gpu)->dspark();
  ASSERT_NE(d, nullptr);
  const int64_t TW = d->tap_width();
  std::vector<int32_t> ids(150);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(11 + (i * 104729) % 5000);
  Bf16Operands bf16;
  std::vector<double> gaps;
  (*gpu)->set_trace(&gaps);
  v41::SequenceState st = v41::make_sequence_state((*cpu)->config());
  std::vector<float> logits, want;
  const int64_t chunk0 = 70, chunk = 64;  // the chunk ends past the 128-row window
  ASSERT_TRUE((*cpu)->forward(st, ids.data(), chunk0, false, &logits, 0, &want).ok());
  Pages pages = pages_for(**gpu, 0, 1);
  PagedSequence q = pages.seq(**gpu);
  DeviceBuffer<float> taps(chunk * TW);
  std::vector<float> got(chunk * TW);
  // Loads the CPU's state into the GPU's pages, runs n tokens on both, compares each row's taps.
  auto compare = [&](int64_t n, std::vector<Step>* steps) {
    const std::vector<float> bytes = state_bytes(st, **gpu);
    ASSERT_TRUE(
        (*gpu)->write_pages(pages.ids.data(), int64_t(pages.ids.size()), bytes.data()).ok());
    const int64_t at = st.num_tokens;
    q.num_tokens = at;
    q.taps = taps.get();
    gaps.clear();
    if (n == 1)
      ASSERT_TRUE((*gpu)->decode_paged(&q, &ids[at], 1, nullptr, nullptr).ok());
    else
      ASSERT_TRUE((*gpu)->forward_paged(q, &ids[at], n, false, nullptr).ok());
    ASSERT_TRUE((*cpu)->forward(st, &ids[at], n, false, &logits, 0, &want).ok());
    DI_CUDA_CHECK(cudaMemcpy(got.data(), taps.get(), n * TW * 4, cudaMemcpyDeviceToHost));
    std::vector<double> err;
    for (int64_t r = 0; r < n; ++r) err.push_back(row_rel_l2(&got[r * TW], &want[r * TW], TW));
    add_chunk(err, gaps, steps);
  };
  std::vector<Step> chunk_steps, decode_steps;
  compare(chunk, &chunk_steps);
  while (st.num_tokens < int64_t(ids.size()) && !::testing::Test::HasFatalFailure())
    compare(1, &decode_steps);
  (*gpu)->set_trace(nullptr);
  expect_steps(chunk_steps, "dspark taps, prefill chunk");
  expect_steps(decode_steps, "dspark taps, decode steps");
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
