// DSpark speculative decoding through the engine (issue 19): the MTP switch on the tiny V4.1
// model with draft weights (v41-dspark) drafts DSpark blocks through the CPU runner, and every
// output (tokens, text, finish reasons, logprobs) is the one the same engine gives with the switch
// off. The draft weights are random, so few drafts are accepted: what is checked is that drafts
// are proposed, verified, rolled back and counted, and that nothing else changes. Exactness of
// the drafter's state after rollbacks, forks and restarts is checked on the runner
// (runtime/cpu/dspark_drafting_test.cc).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <regex>
#include <set>

#include "deepinfer/base/sanitized_build.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_test_util.h"
#include "deepinfer/engine/testing/test_device.h"
#include "deepinfer/loader/checkpoint_copy_for_tests.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

const std::string& dspark_dir() { return v41::tiny_model_dir_for_test(true, "v41-dspark"); }

// DEEPINFER_TEST_DEVICE=cuda runs these on the CUDA runner (its drafter: runtime/cuda/
// dspark_tracks.h), bit for bit only under DEEPINFER_BATCH_INVARIANT=1.
const testing::TestDevice& device() {
  static const testing::TestDevice d = testing::test_device_from_env();
  return d;
}

EngineArgs args(const std::string& dir, bool dspark) {
  EXPECT_TRUE(device().bitwise) << "DSpark's outputs are compared bit for bit: on cuda it needs "
                                   "DEEPINFER_BATCH_INVARIANT=1";
  EngineArgs a;
  device().apply(&a);
  if (device().cuda) a.kv_memory_bytes = int64_t(1) << 30;
  a.model = dir;
  a.max_num_batched_tokens = 256;
  a.max_num_seqs = 64;
  a.switches.enable_mtp = dspark;
  a.switches.nextn_decode = 5;
  return a;
}

std::unique_ptr<Engine> make(const EngineArgs& a) {
  auto e = Engine::create(a);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

// 64 requests: prompt lengths 1..200 (some past a 128-token page), max_tokens 1..24, every third
// seeded and sampled, every fifth with logprobs, one regex-constrained.
std::vector<GenerateRequest> mixed_batch(int n) {
  std::mt19937_64 rng(23);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < n; ++i) {
    GenerateRequest r;
    r.prompt_ids.resize(1 + rng() % (i % 4 == 0 ? 200 : 60));
    for (auto& id : r.prompt_ids) id = static_cast<int32_t>(2 + rng() % 120000);
    r.params.max_tokens = 1 + static_cast<int>(rng() % 16);
    r.params.ignore_eos = true;
    r.params.temperature = 0.0f;
    if (i % 3 == 1) {
      r.params.temperature = 0.9f;
      r.params.seed = 500 + i;
    }
    if (i % 5 == 2) r.params.logprobs = 3;
    out.push_back(r);
  }
  GenerateRequest& g = out[n / 2];
  g.params.temperature = 0.0f;
  g.params.max_tokens = 30;
  sample::StructuredOutput so;
  so.kind = sample::StructuredOutput::Kind::kRegex;
  so.spec = "[a-z]{3,8}@[a-z]{2,6}\\.(com|org)";
  g.params.so_args = so;
  return out;
}

void expect_same_outputs(const std::vector<RequestOutput>& got,
                         const std::vector<RequestOutput>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok())
        << what << " request " << i << ": " << got[i].status.to_string();
    ASSERT_TRUE(want[i].status.ok()) << what << " reference " << i;
    ASSERT_EQ(got[i].outputs.size(), want[i].outputs.size()) << what << " request " << i;
    for (size_t j = 0; j < got[i].outputs.size(); ++j) {
      const CompletionOutput &a = got[i].outputs[j], &b = want[i].outputs[j];
      const std::string at = what + " request " + std::to_string(i) + "." + std::to_string(j);
      EXPECT_EQ(a.token_ids, b.token_ids) << at;
      EXPECT_EQ(a.text, b.text) << at;
      EXPECT_EQ(a.finish_reason, b.finish_reason) << at;
      ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << at;
      for (size_t k = 0; k < a.logprobs.size(); ++k) {
        EXPECT_EQ(a.logprobs[k].token, b.logprobs[k].token) << at << " position " << k;
        EXPECT_EQ(a.logprobs[k].logprob, b.logprobs[k].logprob) << at << " position " << k;
        EXPECT_EQ(a.logprobs[k].top, b.logprobs[k].top) << at << " position " << k;
      }
    }
  }
}

// Drafts were proposed (several a verification: DSpark drafts a block), and every accepted
// one is counted the same way in the stats, per position and in the requests' usage.
void expect_dspark_counted(const EngineStats& s, const std::vector<RequestOutput>& outs,
                           const std::string& what) {
  std::printf("%s: %lld verifications, %lld drafts, %lld accepted\n", what.c_str(),
              (long long)s.spec_verifications, (long long)s.spec_draft_tokens,
              (long long)s.spec_accepted_tokens);
  EXPECT_GT(s.spec_verifications, 0) << what;
  EXPECT_GT(s.spec_draft_tokens, s.spec_verifications) << what;
  EXPECT_LE(s.spec_draft_tokens, 5 * s.spec_verifications) << what;
  int64_t usage = 0, at = 0;
  for (const RequestOutput& o : outs) usage += o.usage.accepted_prediction_tokens;
  for (int64_t n : s.spec_accepted_at) at += n;
  EXPECT_EQ(usage, s.spec_accepted_tokens) << what;
  EXPECT_EQ(at, s.spec_accepted_tokens) << what;
}

// Under ASan the CPU model runs ~20x slower: a quarter of the batch.
constexpr int kScale = kSanitizedBuild ? 4 : 1;

TEST(DsparkSpeculativeDecoding, MixedBatchOutputsAreThoseWithoutDrafts) {
  const auto reqs = mixed_batch(64 / kScale);
  auto plain = make(args(dspark_dir(), false));
  ASSERT_TRUE(plain);
  const auto ref = testing::run_batch(*plain, reqs);
  EXPECT_EQ(plain->stats().spec_verifications, 0);
  plain.reset();
  const std::string& grammar_text = ref[reqs.size() / 2].outputs[0].text;
  EXPECT_TRUE(
      std::regex_match(grammar_text, std::regex(reqs[reqs.size() / 2].params.so_args->spec)))
      << grammar_text;

  auto e = make(args(dspark_dir(), true));
  ASSERT_TRUE(e);
  const auto got = testing::run_batch(*e, reqs);
  expect_same_outputs(got, ref, "DSpark");
  expect_dspark_counted(e->stats(), got, "DSpark");
}

// The reference (switch off) and DSpark runs of `waves`, one wave after the other on one engine
// each; outputs compared and DSpark's counters checked. Returns the DSpark engine's stats.
EngineStats compare_waves(EngineArgs a, const std::vector<std::vector<GenerateRequest>>& waves,
                          const std::string& what, std::vector<RequestOutput>* outs) {
  a.switches.enable_mtp = false;
  auto plain = make(a);
  EXPECT_TRUE(plain);
  if (!plain) return {};
  std::vector<std::vector<RequestOutput>> ref;
  for (const auto& w : waves) ref.push_back(testing::run_batch(*plain, w));
  plain.reset();
  a.switches.enable_mtp = true;
  auto e = make(a);
  EXPECT_TRUE(e);
  if (!e) return {};
  for (size_t i = 0; i < waves.size(); ++i) {
    const auto got = testing::run_batch(*e, waves[i]);
    expect_same_outputs(got, ref[i], what + " wave " + std::to_string(i));
    outs->insert(outs->end(), got.begin(), got.end());
  }
  expect_dspark_counted(e->stats(), *outs, what);
  return e->stats();
}

// n > 1 forks (each child starts from its parent's pages and DSpark state) and prompts that
// start from the prefix cache (the drafter state rebuilds from the uncached tokens): outputs
// unchanged.
TEST(DsparkSpeculativeDecoding, ForksAndCachedPrefixesKeepOutputs) {
  std::mt19937_64 rng(5);
  std::vector<int32_t> shared(130);
  for (auto& id : shared) id = static_cast<int32_t>(2 + rng() % 120000);
  std::vector<GenerateRequest> second;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r;
    r.prompt_ids = shared;
    for (int k = 0; k < 5 + i * 7; ++k)
      r.prompt_ids.push_back(static_cast<int32_t>(2 + rng() % 120000));
    r.params.max_tokens = 8 + i;
    r.params.ignore_eos = true;
    r.params.temperature = 0.0f;
    if (i % 2 == 0) {  // seeded forks
      r.params.n = 3;
      r.params.temperature = 0.8f;
      r.params.seed = 70 + i;
    }
    second.push_back(r);
  }
  EngineArgs a = args(dspark_dir(), true);
  a.kv_cache_interval = 128;
  std::vector<RequestOutput> outs;
  // The first wave puts the shared prefix in the cache for the second.
  compare_waves(a, {{second[1]}, second}, "forks and cache", &outs);
  int64_t cached = 0;
  for (const RequestOutput& o : outs) cached += o.usage.cached_tokens;
  EXPECT_GT(cached, 0) << "no prompt started from the prefix cache";
}

// A pool of about three sequences' pages and prompts just below a page that grow past it:
// sequences are preempted (their runner state and DSpark state dropped) and recomputed.
TEST(DsparkSpeculativeDecoding, PreemptionKeepsOutputs) {
  std::mt19937_64 rng(8);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r;
    r.prompt_ids.resize(115 + rng() % 13);
    for (auto& id : r.prompt_ids) id = static_cast<int32_t>(2 + rng() % 120000);
    r.params.max_tokens = 16;
    r.params.ignore_eos = true;
    r.params.temperature = 0.0f;
    reqs.push_back(r);
  }
  EngineArgs a = args(dspark_dir(), true);
  a.max_num_batched_tokens = 64;
  auto probe = make(a);
  ASSERT_TRUE(probe);
  a.kv_memory_bytes = (int64_t(1) << 30) / probe->capacity().max_sequences * 3;
  device().fit_max_model_len(&a, probe->capacity());
  probe.reset();
  std::vector<RequestOutput> outs;
  const EngineStats s = compare_waves(a, {reqs}, "small pool", &outs);
  std::printf("small pool: %lld preemptions\n", (long long)s.preemptions);
  EXPECT_GT(s.preemptions, 0) << "the pool forced no preemption";
}

// DSpark drafts that are accepted, on a degenerate copy of the model: the target's final norm and
// DSpark's last norm and Markov head zeroed, so every logit of both is 0 and both pick token 0
// (ties to the lower id). Greedy outputs are still the switch-off run's; every draft is accepted
// and counted, per position and in each request's usage.
TEST(DsparkSpeculativeDecoding, AcceptedDraftsAreCounted) {
  const std::string dir = ::testing::TempDir() + "/dspark_agree_" + std::to_string(::getpid());
  fs::create_directories(dir);
  const std::regex zeroed("(model\\.)?(norm|mtp\\.[0-9]+\\.(norm|markov_head\\.head))\\.weight");
  std::set<std::string> zeroed_names;
  const Status copied = testing::copy_checkpoint(dspark_dir(), dir, [&](const std::string& n) {
    if (!std::regex_match(n, zeroed)) return testing::TensorEdit::kKeep;
    zeroed_names.insert(n);
    return testing::TensorEdit::kZero;
  });
  ASSERT_TRUE(copied.ok()) << copied.to_string();
  ASSERT_EQ(zeroed_names.size(), size_t(3));
  std::vector<GenerateRequest> reqs = mixed_batch(8);
  for (GenerateRequest& r : reqs) {
    r.params = sample::SamplingParams();
    r.params.temperature = 0.0f;
    r.params.ignore_eos = true;
    r.params.max_tokens = 12;
  }
  std::vector<RequestOutput> outs;
  EngineArgs a = args(dir, true);
  a.max_num_batched_tokens = 64;
  const EngineStats s = compare_waves(a, {reqs}, "agreeing drafts", &outs);
  EXPECT_EQ(outs[0].outputs[0].token_ids, std::vector<int32_t>(12, 0));
  EXPECT_GT(s.spec_accepted_tokens, 0);
  EXPECT_EQ(s.spec_accepted_tokens, s.spec_draft_tokens);
  ASSERT_EQ(s.spec_accepted_at.size(), size_t(5));
  for (const RequestOutput& o : outs) {  // its first token comes from its prompt's row
    EXPECT_GT(o.usage.accepted_prediction_tokens, 0) << o.request_id;
    EXPECT_LE(o.usage.accepted_prediction_tokens, 11) << o.request_id;
  }
  fs::remove_all(dir);
}

// transformers' save_pretrained writes no mtp.* tensor: the V4.1 checkpoint loads, the switch
// turns itself off with one line on stderr, and the engine decodes plainly.
TEST(DsparkSpeculativeDecoding, CheckpointWithoutDraftWeightsDecodesPlainly) {
  const std::string dir = ::testing::TempDir() + "/dspark_no_draft_" + std::to_string(::getpid());
  fs::create_directories(dir);
  const Status copied = testing::copy_checkpoint_without_draft_tensors(dspark_dir(), dir);
  ASSERT_TRUE(copied.ok()) << copied.to_string();
  const auto reqs = mixed_batch(6);
  auto plain = make(args(dir, false));
  ASSERT_TRUE(plain);
  const auto ref = testing::run_batch(*plain, reqs);
  plain.reset();
  ::testing::internal::CaptureStderr();
  auto e = make(args(dir, true));
  ASSERT_TRUE(e);
  const auto got = testing::run_batch(*e, reqs);
  const std::string err = ::testing::internal::GetCapturedStderr();
  expect_same_outputs(got, ref, "no draft weights");
  EXPECT_EQ(e->stats().spec_verifications, 0);
  const std::regex off_line("speculative decoding off: .*no draft tensors \\(mtp\\.\\*\\)");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(err.begin(), err.end(), off_line), std::sregex_iterator()),
      1)
      << err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer
