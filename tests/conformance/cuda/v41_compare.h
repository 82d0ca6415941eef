// How cuda_v41_test and cuda_dspark_test hold the GPU's V4.1 forward to the CPU's: a GPU sequence
// started from the CPU's own state pages, the CPU with bf16 operands, one step or one chunk
// compared, and V4.1's near-tie rule for the rows whose discrete choices were close.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/model/deepseek_v41/sequence_state.h"
#include "deepinfer/runtime/cuda/forward_v41/cuda_v41_model.h"
#include "logits_tolerance.h"

namespace deepinfer::cuda {

// A sequence's pages in the pool: sequence s of `slots` takes every slots-th page from s, in
// reverse within its run, so entries cross pages out of order.
struct Pages {
  std::vector<int32_t> ids;
  PagedSequence seq(const CudaV41Model& m) const {
    PagedSequence q;
    q.constant_pages = ids.data();
    q.token_pages = ids.data() + m.constant_pages();
    q.num_token_pages = m.max_token_pages();
    return q;
  }
};
inline Pages pages_for(const CudaV41Model& m, int s, int slots) {
  Pages p;
  const int64_t per = m.constant_pages() + m.max_token_pages();
  for (int64_t k = 0; k < per; ++k)
    p.ids.push_back(static_cast<int32_t>((per - 1 - k) * slots + s));
  return p;
}

// The CPU reference, with its projections' operands rounded to bf16 as the GPU's are
// (cpu::set_bf16_operands), so one step of the two differs only in summation order (and RoPE's
// fp64 vs fp32 angles): about 1e-7 of the logits. Over a whole sequence they part anyway: a
// last-bit difference that lands on a bf16, FP8 (window KV, 3 mantissa bits) or FP4 (compressed
// KV, indexer; 1 bit) rounding midpoint becomes a whole rounding step, the next layers' inputs
// then differ by ~1e-3 and cross many more midpoints, and the sequences decorrelate (a random
// tiny model is chaotic). So every comparison below starts the GPU from the CPU's own state
// pages (the two runners' pages have one layout) and compares one step or one chunk.
struct Bf16Operands {
  Bf16Operands() { cpu::set_bf16_operands(true); }
  ~Bf16Operands() { cpu::set_bf16_operands(false); }
};

// The CPU state's pages in a GPU sequence's page order (constant pages, then token pages).
inline std::vector<float> state_bytes(v41::SequenceState& st, const CudaV41Model& m) {
  const int64_t pf = m.page_bytes() / 4;
  std::vector<float> out;
  for (int64_t k = 0; k < m.constant_pages(); ++k) {
    const float* p = st.pages->constant_page(k);
    out.insert(out.end(), p, p + pf);
  }
  for (int64_t k = 0; k < m.max_token_pages(); ++k) {
    const float* p = st.pages->token_page(k);
    out.insert(out.end(), p, p + pf);
  }
  return out;
}

// One compared row: its error against the CPU and the GPU's smallest decision gap in it.
struct Step {
  double err, gap;
};

// The near-tie rule for V4.1. A row is held to kRowTol (a bug is O(1)) unless one of its discrete
// choices was a near-tie, after which the GPU legitimately follows another path. Near is wider
// than V4's kNearTie (2^-8, bf16's precision): within one step, a value that crosses an FP8
// rounding midpoint (the window KV, 3 mantissa bits) moves by 2^-4 of itself, and the FP4
// indexer operands after it by up to a third, so the scores of later layers can move by that
// order; choices within kNearTieV41 = 2^-4 (E4M3's relative step) are not determined. The median
// row must stay within kMedianTol: most rows cross no rounding midpoint and agree at fp32
// rounding, which a systematic error would not leave as the rule.
constexpr double kMedianTol = 1e-5;
constexpr double kNearTieV41 = 1.0 / 16;
inline void expect_steps(std::vector<Step> steps, const std::string& what) {
  ASSERT_FALSE(steps.empty());
  int ties = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool tie = steps[i].gap <= kNearTieV41;
    ties += tie && steps[i].err > kRowTol;
    EXPECT_TRUE(steps[i].err <= kRowTol || tie)
        << what << " row " << i << ": rel-L2 " << steps[i].err << ", smallest decision gap "
        << steps[i].gap;
  }
  std::vector<double> err;
  for (const Step& st : steps) err.push_back(st.err);
  std::sort(err.begin(), err.end());
  const double median = err[err.size() / 2];
  EXPECT_LE(median, kMedianTol) << what << ": median";
  // Near-ties are the exception: nine rows in ten within kRowTol whatever their choices (a
  // systematic error in a choice, which the 2^-4 gap alone could excuse, breaks this).
  EXPECT_LE(err[err.size() * 9 / 10], kRowTol) << what << ": 90th percentile";
  std::printf(
      "%s: %zu rows, rel-L2 median %.2g, p90 %.2g, worst %.2g; %d past kRowTol after a "
      "near-tie\n",
      what.c_str(), err.size(), median, err[err.size() * 9 / 10], err.back(), ties);
}

// A chunk's rows in order: from the first row that leaves fp32 agreement (a rounding midpoint or
// a near-tie crossed), the later rows attend its changed state and part further (the cascade
// the comparisons avoid by starting from the CPU's state); that first row is held by
// expect_steps' rule with the smallest gap of the rows up to it, and the rows after it only to
// being finite.
constexpr double kExact = 1e-5;
inline void add_chunk(const std::vector<double>& err, const std::vector<double>& gap,
                      std::vector<Step>* out) {
  double g = INFINITY;
  for (size_t r = 0; r < err.size(); ++r) {
    g = std::min(g, gap[r]);
    out->push_back({err[r], g});
    if (err[r] > kExact) {
      for (size_t k = r + 1; k < err.size(); ++k) EXPECT_TRUE(std::isfinite(err[k]));
      return;
    }
  }
}

}  // namespace deepinfer::cuda
