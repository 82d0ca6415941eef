#include "deepinfer/sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace deepinfer::sample {
namespace {

constexpr int32_t kNoEos = -1;

std::vector<float> log_probs(const std::vector<double>& p, float shift = 0.0f) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)) + shift);
  return l;
}

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// Draws n tokens from the same logits (sample() rewrites them, so each call gets a copy).
std::vector<int> counts(SequenceSampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> c(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    ++c[s.sample(l.data(), static_cast<int64_t>(l.size()), kNoEos).token];
  }
  return c;
}

double chi_square(const std::vector<int>& observed, const std::vector<double>& expected_p, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = expected_p[i] * n;
    chi += (observed[i] - e) * (observed[i] - e) / e;
  }
  return chi;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToLowestId) {
  SequenceSampler s(greedy_params(), 1, {});
  std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l.data(), 4, kNoEos).token, 1);
  std::vector<float> l2 = {-3.0f, -2.0f, -7.0f, -2.5f};
  EXPECT_EQ(s.sample(l2.data(), 4, kNoEos).token, 1);
  EXPECT_TRUE(s.greedy());
}

// The runner may return only the argmax when nothing but greedy choice touches the logits.
TEST(Sampler, ArgmaxSufficesOnlyWhenNothingShapesTheLogits) {
  EXPECT_TRUE(SequenceSampler(greedy_params(), 1, {}).argmax_suffices());
  SamplingParams p = greedy_params();
  p.temperature = 0.7f;
  EXPECT_FALSE(SequenceSampler(p, 1, {}).argmax_suffices());
  p = greedy_params();
  p.logit_bias = {{3, 0.0f}};
  EXPECT_FALSE(SequenceSampler(p, 1, {}).argmax_suffices());
  p = greedy_params();
  p.repetition_penalty = 1.1f;
  EXPECT_FALSE(SequenceSampler(p, 1, {}).argmax_suffices());
  p = greedy_params();
  p.presence_penalty = 0.5f;
  EXPECT_FALSE(SequenceSampler(p, 1, {}).argmax_suffices());
  p = greedy_params();
  p.logprobs = 0;
  EXPECT_FALSE(SequenceSampler(p, 1, {}).argmax_suffices());
  // min_tokens masks eos until that many tokens were accepted.
  p = greedy_params();
  p.min_tokens = 2;
  SequenceSampler s(p, 1, {});
  EXPECT_FALSE(s.argmax_suffices());
  s.accept(7);
  EXPECT_FALSE(s.argmax_suffices());
  s.accept(8);
  EXPECT_TRUE(s.argmax_suffices());
}

TEST(Sampler, TinyTemperatureIsGreedy) {
  SamplingParams p;
  p.temperature = 1e-6f;  // below kGreedyTemperature
  SequenceSampler s(p, 1, {});
  EXPECT_TRUE(s.greedy());
  std::vector<float> l = {0.5f, 2.0f, 2.5f, -1.0f};
  EXPECT_EQ(s.sample(l.data(), 4, kNoEos).token, 2);
}

TEST(Sampler, LowTemperatureApproachesArgmax) {
  // Gap 0.1 at T=1e-3 is a factor e^-100 for the runner-up: every draw is the argmax.
  SamplingParams p;
  p.temperature = 1e-3f;
  p.seed = 5;
  SequenceSampler s(p, 0, {});
  EXPECT_FALSE(s.greedy());
  const auto c = counts(s, {1.0f, 3.0f, 2.9f, 0.5f}, 500);
  EXPECT_EQ(c[1], 500);
}

TEST(Sampler, FrequenciesMatchSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  SamplingParams p;
  p.seed = 1234;
  SequenceSampler s(p, 0, {});
  const int n = 20000;
  const auto c = counts(s, log_probs(probs, 2.5f), n);
  // Chi-square, 3 degrees of freedom: 16.27 is the 0.1% critical value.
  EXPECT_LT(chi_square(c, probs, n), 16.27);
}

TEST(Sampler, TemperatureSharpensAsSoftmaxOfScaledLogits) {
  // T = 0.5 squares the probabilities: 1, 4, 9, 16 over 30.
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 99;
  SequenceSampler s(p, 0, {});
  const int n = 20000;
  const auto c = counts(s, log_probs({0.1, 0.2, 0.3, 0.4}), n);
  EXPECT_LT(chi_square(c, {1.0 / 30, 4.0 / 30, 9.0 / 30, 16.0 / 30}, n), 16.27);
}

TEST(Sampler, TopKRenormalizesOverTheKept) {
  SamplingParams p;
  p.top_k = 2;
  p.seed = 7;
  SequenceSampler s(p, 0, {});
  const int n = 10000;
  const auto c = counts(s, log_probs({0.1, 0.2, 0.3, 0.4}), n);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 0);
  // 1 degree of freedom: 10.83 is the 0.1% critical value.
  EXPECT_LT(chi_square({c[2], c[3]}, {3.0 / 7, 4.0 / 7}, n), 10.83);
}

TEST(Sampler, TopPAndMinPRenormalizeOverTheKept) {
  // top_p 0.6: mass before 0.4, 0.3, 0.2, 0.1 is 0, .4, .7, .9 -> keeps ids 3, 2.
  // Then min_p 0.8: 0.3 / 0.4 = 0.75 < 0.8 drops id 2.
  SamplingParams p;
  p.top_p = 0.6f;
  p.seed = 8;
  SequenceSampler s(p, 0, {});
  const int n = 10000;
  const auto c = counts(s, log_probs({0.1, 0.2, 0.3, 0.4}), n);
  EXPECT_EQ(c[0] + c[1], 0);
  EXPECT_LT(chi_square({c[2], c[3]}, {3.0 / 7, 4.0 / 7}, n), 10.83);

  p.min_p = 0.8f;
  SequenceSampler s2(p, 0, {});
  const auto c2 = counts(s2, log_probs({0.1, 0.2, 0.3, 0.4}), 1000);
  EXPECT_EQ(c2[3], 1000);
}

TEST(Sampler, SameSeedSameTokensWhateverElseIsSampled) {
  SamplingParams p;
  p.seed = 42;
  const std::vector<float> flat(1000, 0.0f);
  SequenceSampler a(p, 0, {});
  SequenceSampler b(p, 12345, {});  // fallback ignored when seeded
  SamplingParams other_p;
  other_p.seed = 7;
  SequenceSampler other(other_p, 0, {});
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 64; ++i) {
    auto l = flat;
    ta.push_back(a.sample(l.data(), 1000, kNoEos).token);
    for (int j = 0; j < 3; ++j) {  // another sequence in the "batch" draws in between
      auto lo = flat;
      other.sample(lo.data(), 1000, kNoEos);
    }
    l = flat;
    tb.push_back(b.sample(l.data(), 1000, kNoEos).token);
  }
  EXPECT_EQ(ta, tb);

  SamplingParams q;
  q.seed = 43;
  SequenceSampler c(q, 0, {});
  std::vector<int32_t> tc;
  for (int i = 0; i < 64; ++i) {
    auto l = flat;
    tc.push_back(c.sample(l.data(), 1000, kNoEos).token);
  }
  EXPECT_NE(ta, tc);
}

// seq_seed keys the draw by the output index: a sampler that reached index i by accepting
// tokens without drawing (a replay, accepted drafts) draws what one that sampled every index
// draws there, and the stream seed no longer matters.
TEST(Sampler, SeqSeedDrawDependsOnlyOnTheOutputIndex) {
  SamplingParams p;
  p.seq_seed = 2026;
  p.seed = 1;
  const std::vector<float> flat(1000, 0.0f);
  // Samples and accepts output tokens [from, 48); the tokens drawn.
  auto run = [&](SequenceSampler& s, int from) {
    std::vector<int32_t> out;
    for (int i = from; i < 48; ++i) {
      auto l = flat;
      out.push_back(s.sample(l.data(), 1000, kNoEos).token);
      s.accept(out.back());
    }
    return out;
  };
  SequenceSampler every(p, 0, {});
  const std::vector<int32_t> drawn = run(every, 0);
  for (int skip : {1, 7, 30}) {
    SamplingParams q = p;
    q.seed = 99 + skip;  // ignored under seq_seed
    SequenceSampler late(q, 5, {});
    for (int i = 0; i < skip; ++i) late.accept(static_cast<int32_t>(i));
    EXPECT_EQ(run(late, skip), std::vector<int32_t>(drawn.begin() + skip, drawn.end()))
        << "after " << skip << " tokens accepted without a draw";
  }
  SamplingParams other = p;
  other.seq_seed = 2027;
  SequenceSampler o(other, 0, {});
  EXPECT_NE(run(o, 0), drawn);
}

TEST(Sampler, SeqSeedFrequenciesMatchSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const std::vector<float> logits = log_probs(probs, -1.0f);
  std::vector<int> c(probs.size(), 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {  // one draw per seq_seed: the keys, not the stream, vary
    SamplingParams p;
    p.seq_seed = static_cast<uint64_t>(i);
    SequenceSampler s(p, 0, {});
    auto l = logits;
    ++c[s.sample(l.data(), static_cast<int64_t>(l.size()), kNoEos).token];
  }
  EXPECT_LT(chi_square(c, probs, n), 16.27);  // chi-square, 3 dof, 0.1% critical value
}

TEST(Sampler, FallbackSeedWhenUnseeded) {
  SamplingParams seeded;
  seeded.seed = 77;
  SamplingParams unseeded;
  const std::vector<float> flat(500, 0.0f);
  SequenceSampler a(seeded, 1, {});
  SequenceSampler b(unseeded, 77, {});
  SequenceSampler c(unseeded, 78, {});
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 32; ++i) {
    auto l = flat;
    ta.push_back(a.sample(l.data(), 500, kNoEos).token);
    l = flat;
    tb.push_back(b.sample(l.data(), 500, kNoEos).token);
    l = flat;
    tc.push_back(c.sample(l.data(), 500, kNoEos).token);
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampler, ChildParamsOffsetTheSeed) {
  SamplingParams p;
  p.n = 3;
  p.seed = 10;
  EXPECT_EQ(child_params(p, 0).seed, 10u);
  EXPECT_EQ(child_params(p, 2).seed, 12u);
  EXPECT_EQ(child_params(p, 2).n, 1);
  SamplingParams u;
  EXPECT_FALSE(child_params(u, 1).seed.has_value());
  p.seq_seed = 5;
  EXPECT_EQ(child_params(p, 2).seq_seed, 7u);
  EXPECT_FALSE(child_params(u, 1).seq_seed.has_value());
}

TEST(Sampler, PenaltiesMatchHandComputedLogits) {
  // prompt {1, 2}, output {2, 3, 3}; rep 2, freq 0.5, presence 0.25.
  // rep over {1, 2, 3}: 2.0/2 = 1.0, -1.0*2 = -2.0, 4.0/2 = 2.0.
  // then id 2 (count 1): -2.0 - 0.5 - 0.25 = -2.75; id 3 (count 2): 2.0 - 1.0 - 0.25 = 0.75.
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  SequenceSampler s(p, 0, {1, 2});
  s.accept(2);  // before the first sample: folded in lazily
  std::vector<float> warm(5, 0.0f);
  (void)s.sample(warm.data(), 5, kNoEos);
  s.accept(3);  // after: counted directly
  s.accept(3);
  std::vector<float> l = {1.0f, 2.0f, -1.0f, 4.0f, 0.5f};
  const auto r = s.sample(l.data(), 5, kNoEos);
  EXPECT_EQ(l, (std::vector<float>{1.0f, 1.0f, -2.75f, 0.75f, 0.5f}));
  EXPECT_EQ(r.token, 0);  // ties 0 and 1 -> lowest id
  EXPECT_EQ(s.output_ids(), (std::vector<int32_t>{2, 3, 3}));
}

TEST(Sampler, RepetitionPenaltyCountsPromptOnceAndFrequencyOnlyOutput) {
  // Prompt repeats id 0 three times: repetition divides once; frequency ignores the prompt.
  SamplingParams p = greedy_params();
  p.repetition_penalty = 1.25f;
  p.frequency_penalty = 1.0f;
  SequenceSampler s(p, 0, {0, 0, 0});
  s.accept(1);
  std::vector<float> l = {5.0f, 5.0f, -2.0f};
  s.sample(l.data(), 3, kNoEos);
  // id 0: 5/1.25 = 4; id 1: 5/1.25 - 1 = 3; id 2 untouched.
  EXPECT_EQ(l, (std::vector<float>{4.0f, 3.0f, -2.0f}));
}

TEST(Sampler, NegativePresencePenaltyEncouragesRepeats) {
  SamplingParams p = greedy_params();
  p.presence_penalty = -1.5f;
  SequenceSampler s(p, 0, {});
  s.accept(2);
  s.accept(2);
  std::vector<float> l = {1.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(l.data(), 3, kNoEos).token, 2);  // 1.0 + 1.5 = 2.5
  EXPECT_EQ(l[2], 2.5f);
}

TEST(Sampler, LogitBiasIsAddedBeforeTemperature) {
  SamplingParams p = greedy_params();
  p.logit_bias = {{2, 5.0f}, {0, -1.5f}};
  SequenceSampler s(p, 0, {});
  std::vector<float> l = {0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(s.sample(l.data(), 4, kNoEos).token, 2);
  EXPECT_EQ(l, (std::vector<float>{-1.5f, 0.0f, 5.0f, 0.0f}));

  p.temperature = 2.0f;
  SequenceSampler t(p, 0, {});
  std::vector<float> l2 = {0.0f, 0.0f, 0.0f, 0.0f};
  t.sample(l2.data(), 4, kNoEos);
  EXPECT_EQ(l2, (std::vector<float>{-0.75f, 0.0f, 2.5f, 0.0f}));
}

TEST(Sampler, LogitBiasCanBanAToken) {
  SamplingParams p;
  p.seed = 3;
  p.logit_bias = {{1, -100.0f}};
  SequenceSampler s(p, 0, {});
  const auto c = counts(s, {0.0f, 0.0f, 0.0f}, 2000);
  EXPECT_EQ(c[1], 0);
  EXPECT_GT(c[0], 0);
  EXPECT_GT(c[2], 0);
}

TEST(Sampler, MinTokensMasksEosAndStopTokens) {
  const int32_t eos = 2;
  SamplingParams p = greedy_params();
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  SequenceSampler s(p, 0, {});
  const std::vector<float> base = {0.0f, 5.0f, 10.0f, 1.0f};
  for (int i = 0; i < 2; ++i) {
    auto l = base;
    const auto r = s.sample(l.data(), 4, eos);
    EXPECT_EQ(r.token, 3) << i;
    EXPECT_EQ(l[1], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(l[2], -std::numeric_limits<float>::infinity());
    s.accept(r.token);
  }
  auto l = base;
  EXPECT_EQ(s.sample(l.data(), 4, eos).token, 2);  // two tokens generated: eos allowed again
}

TEST(Sampler, MinTokensMaskHoldsWhenSampling) {
  SamplingParams p;
  p.seed = 11;
  p.min_tokens = 1;
  SequenceSampler s(p, 0, {});
  // Without the mask eos (id 0) would have probability ~1.
  int eos_draws = 0;
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l = {20.0f, 0.0f, 0.0f};
    eos_draws += s.sample(l.data(), 3, /*eos=*/0).token == 0;
  }
  EXPECT_EQ(eos_draws, 0);
}

TEST(Sampler, IgnoreEosDoesNotMaskEos) {
  // ignore_eos only stops eos from finishing the sequence (StopChecker); eos stays sampleable.
  SamplingParams p = greedy_params();
  p.ignore_eos = true;
  SequenceSampler s(p, 0, {});
  std::vector<float> l = {0.0f, 1.0f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 3, /*eos=*/2).token, 2);
}

TEST(Sampler, LogprobsOfTheSampledTokenAndTopN) {
  SamplingParams p = greedy_params();
  p.logprobs = 2;
  SequenceSampler s(p, 0, {});
  auto l = log_probs({0.1, 0.2, 0.3, 0.4}, 3.0f);
  const auto r = s.sample(l.data(), 4, kNoEos);
  EXPECT_EQ(r.token, 3);
  EXPECT_NEAR(r.logprob, std::log(0.4), 1e-5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].id, 3);
  EXPECT_NEAR(r.top[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(r.top[1].id, 2);
  EXPECT_NEAR(r.top[1].logprob, std::log(0.3), 1e-5);
}

TEST(Sampler, LogprobsAreAfterTemperatureBeforeTruncation) {
  // T = 0.5: probs 1, 4, 9, 16 over 30. top_k = 1 forces id 3 but its logprob stays log(16/30).
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 1;
  p.logprobs = 4;
  p.seed = 1;
  SequenceSampler s(p, 0, {});
  auto l = log_probs({0.1, 0.2, 0.3, 0.4});
  const auto r = s.sample(l.data(), 4, kNoEos);
  EXPECT_EQ(r.token, 3);
  EXPECT_NEAR(r.logprob, std::log(16.0 / 30), 1e-5);
  ASSERT_EQ(r.top.size(), 4u);
  const int32_t want_ids[] = {3, 2, 1, 0};
  const double want_p[] = {16.0 / 30, 9.0 / 30, 4.0 / 30, 1.0 / 30};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.top[i].id, want_ids[i]);
    EXPECT_NEAR(r.top[i].logprob, std::log(want_p[i]), 1e-5);
  }
}

TEST(Sampler, LogprobsZeroGivesOnlyTheSampledToken) {
  SamplingParams p = greedy_params();
  p.logprobs = 0;
  SequenceSampler s(p, 0, {});
  std::vector<float> l = {0.0f, 0.0f};
  const auto r = s.sample(l.data(), 2, kNoEos);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.5), 1e-6);
  EXPECT_TRUE(r.top.empty());
}

TEST(Sampler, TopLogprobTiesGoToLowerIds) {
  SamplingParams p = greedy_params();
  p.logprobs = 3;
  SequenceSampler s(p, 0, {});
  std::vector<float> l = {1.0f, 2.0f, 1.0f, 2.0f, 1.0f};
  SampleResult r;
  r.top.reserve(3);
  s.sample(l.data(), 5, kNoEos, &r);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].id, 1);
  EXPECT_EQ(r.top[1].id, 3);
  EXPECT_EQ(r.top[2].id, 0);
  s.sample(l.data(), 5, kNoEos, &r);  // reused result is refilled, not appended to
  EXPECT_EQ(r.top.size(), 3u);
}

}  // namespace
}  // namespace deepinfer::sample
