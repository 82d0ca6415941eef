// Deterministic sampling (issue 19): a sampled request with a fixed seq_seed gives the same
// tokens alone and in 20 runs with random batch neighbours, chunk budgets and prefix-cache
// states. The CPU runner is batch- and chunking-invariant by construction
// (DESIGN.md), so this checks the engine's side: per-sequence draws keyed by position, whatever
// runs beside them. The seed is printed; DEEPINFER_DETERMINISM_SEED replays one.
// DEEPINFER_TEST_DEVICE=cuda runs it with the CUDA runner on the GPU machine, where it needs
// DEEPINFER_BATCH_INVARIANT=1 (deterministic sampling is batch invariance plus seq_seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_test_util.h"
#include "deepinfer/engine/testing/test_device.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"

namespace deepinfer {
namespace {

const std::string& model_dir() {
  static const std::string dir =
      v4::quantized_tiny_model_for_test("deterministic_sampling_model", 19);
  return dir;
}

const testing::TestDevice& device() {
  static const testing::TestDevice d = testing::test_device_from_env();
  return d;
}

std::unique_ptr<Engine> make_engine(int64_t budget) {
  EngineArgs a;
  device().apply(&a);
  a.model = model_dir();
  a.max_num_batched_tokens = budget;
  a.max_num_seqs = static_cast<int>(std::min<int64_t>(16, budget));
  a.kv_memory_bytes = int64_t{256} << 20;
  auto e = Engine::create(a);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, size_t n) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % 128000);
  return ids;
}

GenerateRequest sampled(std::vector<int32_t> ids, int max_tokens) {
  GenerateRequest r;
  r.prompt_ids = std::move(ids);
  r.params.temperature = 1.0f;
  r.params.top_p = 0.95f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

TEST(DeterministicSampling, SeqSeedGivesTheSameTokensWhateverRunsBesideIt) {
  ASSERT_TRUE(device().bitwise)
      << "deterministic sampling on CUDA needs batch invariance: DEEPINFER_BATCH_INVARIANT=1";
  std::mt19937_64 rng(
      testing::printed_test_seed("DEEPINFER_DETERMINISM_SEED", "deterministic sampling"));
  std::mt19937_64 fixed(7);
  const std::vector<int32_t> prompt = random_ids(fixed, 150);  // two 128-token units + a tail
  GenerateRequest target = sampled(prompt, 16);
  target.params.seq_seed = 4242;
  target.params.seed = 1;

  // Budgets 13, 48 and 512 cut the prompt differently; the prefix cache adds its own cuts.
  std::vector<std::unique_ptr<Engine>> engines;
  for (int64_t budget : {13, 48, 512}) engines.push_back(make_engine(budget));
  for (const auto& e : engines) ASSERT_NE(e, nullptr);
  auto alone = engines[2]->generate(target);
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  const std::vector<int32_t> expected = alone->outputs[0].token_ids;
  ASSERT_EQ(expected.size(), 16u);

  for (int run = 0; run < 20; ++run) {
    Engine& e = *engines[rng() % engines.size()];
    std::vector<GenerateRequest> reqs;
    const int neighbours = static_cast<int>(rng() % 7);
    for (int i = 0; i < neighbours; ++i) {
      // Some neighbours share the target's first unit, so its cache state varies too.
      std::vector<int32_t> ids = random_ids(rng, 1 + rng() % 100);
      if (rng() % 3 == 0) ids.insert(ids.begin(), prompt.begin(), prompt.begin() + 128);
      GenerateRequest n = sampled(std::move(ids), 1 + static_cast<int>(rng() % 12));
      n.params.temperature = 0.5f + static_cast<float>(rng() % 10) / 10.0f;
      if (rng() % 2) n.params.seq_seed = rng();
      reqs.push_back(std::move(n));
    }
    const size_t at = rng() % (reqs.size() + 1);
    reqs.insert(reqs.begin() + static_cast<std::ptrdiff_t>(at), target);
    const std::vector<RequestOutput> outs = testing::run_batch(e, reqs);
    ASSERT_FALSE(outs[at].outputs.empty()) << "run " << run;
    EXPECT_EQ(outs[at].outputs[0].token_ids, expected)
        << "run " << run << ": " << neighbours << " neighbours, target at " << at;
  }

  // The check can fail: another seq_seed draws other tokens, and seq_seed outranks seed.
  GenerateRequest other = target;
  other.params.seq_seed = 4243;
  auto different = engines[0]->generate(other);
  ASSERT_TRUE(different.ok());
  EXPECT_NE(different->outputs[0].token_ids, expected);
  GenerateRequest reseeded = target;
  reseeded.params.seed = 2;
  auto same = engines[1]->generate(reseeded);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->outputs[0].token_ids, expected);
}

}  // namespace
}  // namespace deepinfer
