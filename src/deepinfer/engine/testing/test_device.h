// Tests only (header-only, needs gtest): the device an engine-level test runs on. The CPU by
// default; DEEPINFER_TEST_DEVICE=cuda takes the CUDA runner, on the GPU machine (the
// prefix-cache torture test of issue 18 and the deterministic-sampling test of issue 19 use
// it). `bitwise`: outputs must equal their reference run's exactly: always on the CPU (its
// forward is the same for any chunking and batch), and on CUDA with DEEPINFER_BATCH_INVARIANT=1
// (which the engine reads as well). Otherwise a different chunking or batch changes the bf16
// roundings, and a split is allowed only at a near-tie that the CPU reference measures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/switches.h"
#include "deepinfer/model/testing/reference_logits.h"

namespace deepinfer::testing {

// The CUDA tests' rule (tests/conformance/cuda/logits_tolerance.h): candidates closer than
// 2^-8 of the logit scale are one bf16 ulp apart, so their order is not determined on the GPU.
constexpr double kNearTie = 1.0 / 256;

struct TestDevice {
  bool cuda = false;
  bool bitwise = true;

  void apply(EngineArgs* a) const {
    if (!cuda) return;
    a->device = runtime::Device::kCuda;
    a->gpu_memory_utilization = 0.3;  // the test sets the pool's bytes itself
  }

  // For a test that gives the engine a small pool (a->kv_memory_bytes): the CUDA runner refuses
  // a pool without room for one sequence of --max-model-len (as vLLM does), where the CPU
  // runner's longest sequence shrinks to what the pool holds. On cuda this sets max_model_len
  // to that same length, so both devices run the test alike. `probe`: any engine's capacity
  // for this model (the page geometry does not depend on the pool's size).
  void fit_max_model_len(EngineArgs* a, const EngineCapacity& probe) const {
    if (!cuda || a->max_model_len > 0) return;
    const int64_t pages = a->kv_memory_bytes / probe.page_bytes - probe.constant_pages;
    a->max_model_len = std::clamp<int64_t>(pages * probe.page_tokens, 1, 65536);
  }

  // How far the CPU reference (plain numerics) at the end of `prefix` prefers token a over b,
  // relative to the largest logit's magnitude.
  double reference_gap(const std::string& model_dir, const std::vector<int32_t>& prefix, int32_t a,
                       int32_t b) const {
    std::vector<float> logits;
    const Status st = model_testing::reference_last_logits(model_dir, prefix, &logits);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return 0;
    double scale = 0;
    for (float x : logits) scale = std::max(scale, std::fabs(double(x)));
    return std::fabs(double(logits[a]) - logits[b]) / std::max(scale, 1e-30);
  }

  // got against want (same prompt): equal, or parted where the reference measures a near-tie
  // between the two tokens. Every split is printed with its gap.
  void expect_same_or_near_tie(const std::string& model_dir, const std::vector<int32_t>& prompt,
                               const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                               const std::string& what) const {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t agree = 0;
    while (agree < got.size() && got[agree] == want[agree]) ++agree;
    if (agree == got.size()) return;
    std::vector<int32_t> prefix = prompt;
    prefix.insert(prefix.end(), want.begin(), want.begin() + static_cast<int64_t>(agree));
    const double gap = reference_gap(model_dir, prefix, want[agree], got[agree]);
    std::printf(
        "[%s] parts from its reference after %zu of %zu tokens (%d vs %d): reference gap "
        "%.3e of the logit scale\n",
        what.c_str(), agree, got.size(), want[agree], got[agree], gap);
    EXPECT_LT(gap, kNearTie) << what << ": parts from its reference after " << agree
                             << " tokens with a clear gap";
  }
};

// DEEPINFER_TEST_DEVICE (cpu | cuda, default cpu); on cuda, bitwise when the engine's own
// switches resolve batch invariance on. The choice is printed once.
inline TestDevice test_device_from_env() {
  TestDevice d;
  const char* v = std::getenv("DEEPINFER_TEST_DEVICE");
  const std::string name = v != nullptr && *v != '\0' ? v : "cpu";
  EXPECT_TRUE(name == "cpu" || name == "cuda")
      << "DEEPINFER_TEST_DEVICE must be cpu or cuda, got '" << name << "'";
  d.cuda = name == "cuda";
  if (d.cuda) {
    const StatusOr<Switches> s = resolve_switches(SwitchArgs{});
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    d.bitwise = s.ok() && s->batch_invariant;
  }
  std::printf("engine test on %s: %s\n", name.c_str(),
              d.bitwise ? "bitwise against its reference run"
                        : "splits from the reference allowed only at a measured near-tie");
  return d;
}

}  // namespace deepinfer::testing
