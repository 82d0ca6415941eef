// Speculative decoding through the engine (drafter.h) on the CPU runner: whatever the drafts,
// every output is the one a run without drafts gives, token for token, greedy or seeded; only
// the step count moves. The drafter is the oracle (oracle_drafter.h) holding the reference run's
// own continuations, so the acceptance rate is chosen: 0 (every draft rejected, every
// verification rolled back), 0.6 (mixed) and 1 (all accepted). Budgets that cap the drafts and
// a pool small enough to preempt are covered, and a grammar-constrained request.
// DEEPINFER_TEST_DEVICE=cuda runs the oracle's tests with the CUDA runner on the GPU machine
// (engine/testing/test_device.h), where outputs are compared bit for bit and so need
// DEEPINFER_BATCH_INVARIANT=1 (without it a verification row rounds as a prefill chunk, not as a
// decode). On cuda the MTP test drafts with the GPU's MTP layer; the other MTP tests and the
// DSpark ones are the CPU runner's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "deepinfer/base/sanitized_build.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_test_util.h"
#include "deepinfer/engine/oracle_drafter.h"
#include "deepinfer/engine/testing/test_device.h"
#include "deepinfer/loader/checkpoint_copy_for_tests.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"

namespace deepinfer {
namespace {

const std::string& model_dir() {
  static const std::string dir = v4::quantized_tiny_model_for_test("spec_decode_test_model", 11);
  return dir;
}

const testing::TestDevice& device() {
  static const testing::TestDevice d = testing::test_device_from_env();
  return d;
}

std::unique_ptr<Engine> make_engine(int64_t budget, std::shared_ptr<Drafter> drafter,
                                    int64_t kv_bytes = 1ll << 30, int64_t max_model_len = 0);

// The default pool's capacity, for the page geometry (probed once).
const EngineCapacity& default_capacity() {
  static const EngineCapacity cap = [] {
    auto e = make_engine(64, nullptr);
    return e ? e->capacity() : EngineCapacity{};
  }();
  return cap;
}

std::unique_ptr<Engine> make_engine(int64_t budget, std::shared_ptr<Drafter> drafter,
                                    int64_t kv_bytes, int64_t max_model_len) {
  EXPECT_TRUE(device().bitwise) << "speculative decoding's outputs are compared bit for bit: on "
                                   "cuda it needs DEEPINFER_BATCH_INVARIANT=1";
  EngineArgs a;
  device().apply(&a);
  a.model = model_dir();
  a.max_num_batched_tokens = budget;
  a.max_num_seqs = static_cast<int>(std::min<int64_t>(64, budget));
  a.kv_memory_bytes = kv_bytes;
  if (max_model_len > 0) a.max_model_len = max_model_len;
  if (kv_bytes != (1ll << 30)) device().fit_max_model_len(&a, default_capacity());
  a.drafter = std::move(drafter);
  a.switches.nextn_decode = 5;
  auto e = Engine::create(a);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Mixed prompt lengths and max_tokens; greedy or seeded sampling.
std::vector<GenerateRequest> workload(int n, bool sampled) {
  std::mt19937_64 rng(17);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < n; ++i) {
    GenerateRequest r;
    r.prompt_ids.resize(1 + rng() % 70);
    for (auto& id : r.prompt_ids) id = static_cast<int32_t>(2 + rng() % 128000);
    r.params.max_tokens = 1 + static_cast<int>(rng() % 24);
    r.params.ignore_eos = true;
    r.params.temperature = sampled ? 1.0f : 0.0f;
    if (sampled) r.params.seed = 1000 + i;
    out.push_back(r);
  }
  return out;
}

std::shared_ptr<OracleDrafter> oracle(const std::vector<GenerateRequest>& reqs,
                                      const std::vector<RequestOutput>& ref, double accept) {
  auto d = std::make_shared<OracleDrafter>(accept, 5, 129280);
  for (size_t i = 0; i < reqs.size(); ++i) d->add(reqs[i].prompt_ids, ref[i].outputs[0].token_ids);
  return d;
}

void expect_same_outputs(const std::vector<RequestOutput>& got,
                         const std::vector<RequestOutput>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok())
        << what << " request " << i << ": " << got[i].status.to_string();
    EXPECT_EQ(got[i].outputs[0].token_ids, want[i].outputs[0].token_ids)
        << what << " request " << i;
    EXPECT_EQ(got[i].outputs[0].text, want[i].outputs[0].text) << what << " request " << i;
    EXPECT_EQ(got[i].outputs[0].finish_reason, want[i].outputs[0].finish_reason)
        << what << " request " << i;
  }
}

// The requests' outputs without drafts (and, through steps, the run's step count).
std::vector<RequestOutput> reference(const std::vector<GenerateRequest>& reqs,
                                     int64_t* steps = nullptr) {
  auto e = make_engine(256, nullptr);
  EXPECT_TRUE(e);
  if (!e) return {};
  auto out = testing::run_batch(*e, reqs);
  EXPECT_EQ(e->stats().spec_verifications, 0);
  if (steps) *steps = e->stats().steps;
  return out;
}

int64_t accepted_in_usage(const std::vector<RequestOutput>& outs) {
  int64_t n = 0;
  for (const auto& o : outs) n += o.usage.accepted_prediction_tokens;
  return n;
}

// The same checks on fewer requests under ASan (the CPU model runs ~20x slower there).
constexpr int kScale = kSanitizedBuild ? 4 : 1;

TEST(SpeculativeDecoding, GreedyOutputsAreUnchangedAtAnyAcceptanceRate) {
  const auto reqs = workload(64 / kScale, /*sampled=*/false);  // issue 19: a 64-request mixed batch
  int64_t ref_steps = 0;
  const auto ref = reference(reqs, &ref_steps);
  ASSERT_EQ(ref.size(), reqs.size());
  // Under ASan one mixed rate covers accepting and rejecting (CI time).
  const std::vector<double> rates =
      kSanitizedBuild ? std::vector<double>{0.6} : std::vector<double>{0.0, 0.6, 1.0};
  for (double accept : rates) {
    auto e = make_engine(256, oracle(reqs, ref, accept));
    ASSERT_TRUE(e);
    const auto got = testing::run_batch(*e, reqs);
    const std::string what = "acceptance " + std::to_string(accept);
    expect_same_outputs(got, ref, what);
    const EngineStats s = e->stats();
    std::printf("%s: %lld steps (%lld without drafts), %lld drafts verified, %lld accepted\n",
                what.c_str(), (long long)s.steps, (long long)ref_steps,
                (long long)s.spec_draft_tokens, (long long)s.spec_accepted_tokens);
    EXPECT_GT(s.spec_verifications, 0) << what;
    EXPECT_GT(s.spec_draft_tokens, 0) << what;
    EXPECT_EQ(accepted_in_usage(got), s.spec_accepted_tokens) << what;
    if (accept == 0.0) {
      EXPECT_EQ(s.spec_accepted_tokens, 0) << what;  // every draft is off
    }
    if (accept == 1.0) {
      // The oracle's drafts are the reference's own tokens: all accepted, fewer steps.
      EXPECT_EQ(s.spec_accepted_tokens, s.spec_draft_tokens) << what;
      EXPECT_LT(s.steps, ref_steps) << what;
    }
    if (accept == 0.6) {
      EXPECT_GT(s.spec_accepted_tokens, 0) << what;
      EXPECT_LT(s.spec_accepted_tokens, s.spec_draft_tokens) << what;
    }
    ASSERT_FALSE(s.spec_accepted_at.empty());
    for (size_t i = 1; i < s.spec_accepted_at.size(); ++i)  // a later draft needs the earlier
      EXPECT_LE(s.spec_accepted_at[i], s.spec_accepted_at[i - 1]) << what << " position " << i;
  }
}

// The switch's drafter: the checkpoint's MTP layer through the runner, up to 5 chained drafts a
// step. The tiny model's MTP weights are random, so few drafts are accepted; what is checked is
// that drafts are proposed and verified and that no output changes.
TEST(SpeculativeDecoding, MtpDraftsKeepOutputsUnchanged) {
  const auto reqs = workload(64 / kScale, /*sampled=*/false);  // issue 19: a 64-request mixed batch
  const auto ref = reference(reqs);
  ASSERT_EQ(ref.size(), reqs.size());
  EngineArgs a;
  device().apply(&a);
  a.model = model_dir();
  a.max_num_batched_tokens = 256;
  a.max_num_seqs = 64;
  a.kv_memory_bytes = 1ll << 30;
  a.switches.enable_mtp = true;
  a.switches.nextn_decode = 5;
  auto e = Engine::create(a);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const auto got = testing::run_batch(**e, reqs);
  expect_same_outputs(got, ref, "MTP");
  const EngineStats s = (*e)->stats();
  std::printf("MTP: %lld verifications, %lld drafts, %lld accepted\n",
              (long long)s.spec_verifications, (long long)s.spec_draft_tokens,
              (long long)s.spec_accepted_tokens);
  EXPECT_GT(s.spec_verifications, 0);
  EXPECT_GT(s.spec_draft_tokens, s.spec_verifications);  // chained: several drafts a step
  EXPECT_LE(s.spec_draft_tokens, 5 * s.spec_verifications);
  EXPECT_EQ(accepted_in_usage(got), s.spec_accepted_tokens);
}

// A checkpoint whose config has no MTP layer: the switch turns itself off (one line on stderr)
// and the engine decodes plainly.
TEST(SpeculativeDecoding, MtpOnACheckpointWithoutMtpDecodesPlainly) {
  nlohmann::json cfg;
  {
    std::ifstream f(model_dir() + "/config.json");
    ASSERT_TRUE(f.good());
    f >> cfg;
  }
  cfg["num_nextn_predict_layers"] = 0;
  if (cfg.contains("compress_ratios") && cfg["compress_ratios"].is_array() &&
      cfg["compress_ratios"].size() > cfg["num_hidden_layers"].get<size_t>())
    cfg["compress_ratios"].erase(cfg["compress_ratios"].size() - 1);
  const std::string cfg_path = ::testing::TempDir() + "spec_decode_no_mtp_config.json";
  std::ofstream(cfg_path) << cfg.dump();
  v4::TinyModelOptions o;
  o.config_path = cfg_path;
  o.quantized = true;
  o.seed = 11;
  const std::string dir = v4::write_tiny_model_for_test("spec_decode_no_mtp_model", o);
  const auto reqs = workload(4, /*sampled=*/false);
  EngineArgs plain;
  plain.model = dir;
  auto p = Engine::create(plain);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto ref = testing::run_batch(**p, reqs);
  p->reset();
  EngineArgs a = plain;
  a.switches.enable_mtp = true;
  auto e = Engine::create(a);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  expect_same_outputs(testing::run_batch(**e, reqs), ref, "no MTP layer");
  EXPECT_EQ((*e)->stats().spec_verifications, 0);
}

// What transformers' save_pretrained writes: config.json counts the MTP layer, no shard holds an
// mtp.* tensor. It loads with MTP off (one line when loading says so), the switch then adds
// one line of its own, and the engine decodes plainly.
TEST(SpeculativeDecoding, SavePretrainedCheckpointWithoutMtpTensorsDecodesPlainly) {
  const std::string dir = ::testing::TempDir() + "spec_decode_no_mtp_tensors";
  std::filesystem::create_directories(dir);
  const Status copied = testing::copy_checkpoint_without_draft_tensors(model_dir(), dir);
  ASSERT_TRUE(copied.ok()) << copied.to_string();
  const auto reqs = workload(4, /*sampled=*/false);
  const auto ref = testing::run_batch(*make_engine(256, nullptr), reqs);
  EngineArgs a;
  device().apply(&a);  // the reference ran on the test's device
  a.model = dir;
  a.switches.enable_mtp = true;
  ::testing::internal::CaptureStderr();
  auto e = Engine::create(a);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const auto got = testing::run_batch(**e, reqs);
  const std::string err = ::testing::internal::GetCapturedStderr();
  expect_same_outputs(got, ref, "save_pretrained");
  EXPECT_EQ((*e)->stats().spec_verifications, 0);
  EXPECT_NE(err.find("has no MTP weights (mtp.*)"), std::string::npos) << err;
  // Two lines about MTP (the CUDA runner adds a line of its own about its pool).
  int mtp_lines = 0;
  for (size_t at = 0; at < err.size();) {
    const size_t end = std::min(err.find('\n', at), err.size());
    mtp_lines += err.substr(at, end - at).find("MTP") != std::string::npos;
    at = end + 1;
  }
  EXPECT_EQ(mtp_lines, 2) << err;
  std::filesystem::remove_all(dir);
}

TEST(SpeculativeDecoding, SmallBudgetsAndAPreemptingPoolKeepOutputsUnchanged) {
  // Prompts just below a 128-token page that grow past it while decoding (engine_test's
  // preemption workload), so sequences keep asking the small pool for pages.
  auto reqs = workload(12 / kScale + 2, /*sampled=*/false);
  std::mt19937_64 rng(8);
  for (auto& r : reqs) {
    r.prompt_ids.resize(115 + rng() % 13);
    for (auto& id : r.prompt_ids) id = static_cast<int32_t>(2 + rng() % 128000);
    r.params.max_tokens = 16;
  }
  const auto ref = reference(reqs);
  ASSERT_EQ(ref.size(), reqs.size());
  // A budget of 8 leaves little room for drafts beside prefill chunks (release tree only: the
  // pool case below is the one with memory-safety interest).
  if (!kSanitizedBuild) {
    auto e = make_engine(8, oracle(reqs, ref, 0.6));
    ASSERT_TRUE(e);
    expect_same_outputs(testing::run_batch(*e, reqs), ref, "budget 8");
    EXPECT_GT(e->stats().spec_accepted_tokens, 0);
  }
  // A pool of about three sequences' pages: drafts compete for pages, sequences get preempted
  // and recomputed (their rollbacks dropped with their state).
  {
    const int64_t per_seq =
        (int64_t(1) << 30) / std::max<int64_t>(1, default_capacity().max_sequences);
    auto e = make_engine(64, oracle(reqs, ref, 0.6), per_seq * 3);
    ASSERT_TRUE(e);
    expect_same_outputs(testing::run_batch(*e, reqs), ref, "small pool");
    std::printf("small pool: %lld preemptions, %lld drafts accepted\n",
                (long long)e->stats().preemptions, (long long)e->stats().spec_accepted_tokens);
    EXPECT_GT(e->stats().preemptions, 0) << "the pool forced no preemption";
  }
}

TEST(SpeculativeDecoding, SeededSamplingIsUnchanged) {
  // Each position is sampled as a plain decode samples it (same sampler, same draws in the same
  // order), and a draft is accepted when the sample equals it: lossless for sampling too.
  const auto reqs = workload(16 / kScale, /*sampled=*/true);
  const auto ref = reference(reqs);
  ASSERT_EQ(ref.size(), reqs.size());
  auto e = make_engine(256, oracle(reqs, ref, 0.8));
  ASSERT_TRUE(e);
  expect_same_outputs(testing::run_batch(*e, reqs), ref, "seeded sampling");
  EXPECT_GT(e->stats().spec_accepted_tokens, 0);
}

TEST(SpeculativeDecoding, GrammarConstrainedRequestsVerifyUnderTheirMask) {
  GenerateRequest r;
  r.prompt_ids = {5, 6, 7, 8};
  r.params.temperature = 0;
  r.params.max_tokens = 40;
  sample::StructuredOutput so;
  so.kind = sample::StructuredOutput::Kind::kRegex;
  so.spec = "[a-z]{3,8}@[a-z]{2,6}\\\\.(com|org)";
  r.params.so_args = so;
  const std::vector<GenerateRequest> reqs(3, r);
  const auto ref = reference(reqs);
  ASSERT_EQ(ref.size(), reqs.size());
  ASSERT_TRUE(std::regex_match(ref[0].outputs[0].text, std::regex(so.spec)))
      << ref[0].outputs[0].text;
  for (double accept : {0.0, 1.0}) {
    auto e = make_engine(256, oracle(reqs, ref, accept));
    ASSERT_TRUE(e);
    expect_same_outputs(testing::run_batch(*e, reqs), ref, "so_args " + std::to_string(accept));
  }
}

}  // namespace
}  // namespace deepinfer
