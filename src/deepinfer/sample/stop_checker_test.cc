#include "deepinfer/sample/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace deepinfer::sample {
namespace {

constexpr int32_t kEos = 1;

struct Step {
  std::string out;
  bool finished;
  std::string reason;
};

// Feeds (token, text) pairs; token ids default to 100 + index so they hit nothing.
std::vector<Step> feed(StopChecker& c, const std::vector<std::pair<int32_t, std::string>>& toks) {
  std::vector<Step> steps;
  for (const auto& [tok, text] : toks) {
    Step s;
    s.out = c.push(tok, text, &s.finished, &s.reason);
    steps.push_back(s);
  }
  return steps;
}

std::vector<std::pair<int32_t, std::string>> texts(const std::vector<std::string>& t) {
  std::vector<std::pair<int32_t, std::string>> r;
  for (size_t i = 0; i < t.size(); ++i) r.push_back({static_cast<int32_t>(100 + i), t[i]});
  return r;
}

SamplingParams with_stop(std::vector<std::string> stop, bool include = false) {
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = std::move(stop);
  p.include_stop_str_in_output = include;
  return p;
}

TEST(StopChecker, StopStringAcrossTokens) {
  StopChecker c(with_stop({"Stop"}), kEos);
  const auto s = feed(c, texts({"Hi ", "St", "op", "!"}));
  EXPECT_EQ(s[0].out, "Hi ");
  EXPECT_FALSE(s[0].finished);
  EXPECT_EQ(s[1].out, "");  // "St" could begin "Stop": held back
  EXPECT_FALSE(s[1].finished);
  EXPECT_EQ(s[2].out, "");
  EXPECT_TRUE(s[2].finished);
  EXPECT_EQ(s[2].reason, "stop");
  EXPECT_EQ(s[3].out, "");  // after finishing nothing more comes out
  EXPECT_TRUE(s[3].finished);
  EXPECT_EQ(c.matched_stop(), "Stop");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, StopStringIncludedWhenAsked) {
  StopChecker c(with_stop({"Stop"}, /*include=*/true), kEos);
  const auto s = feed(c, texts({"Hi ", "St", "op"}));
  EXPECT_EQ(s[0].out + s[1].out + s[2].out, "Hi Stop");
  EXPECT_EQ(s[2].out, "Stop");
  EXPECT_TRUE(s[2].finished);
}

TEST(StopChecker, TextAfterTheStopStringIsDropped) {
  for (bool include : {false, true}) {
    StopChecker c(with_stop({"Stop"}, include), kEos);
    const auto s = feed(c, texts({"abStopcd"}));
    EXPECT_EQ(s[0].out, include ? "abStop" : "ab");
    EXPECT_TRUE(s[0].finished);
    EXPECT_EQ(s[0].reason, "stop");
  }
}

TEST(StopChecker, StopStringOverManyTokensWithSelfOverlap) {
  // "aaab" holds "aab" at its end: only the first "a" is content.
  StopChecker c(with_stop({"aab"}), kEos);
  const auto s = feed(c, texts({"a", "a", "a", "b"}));
  EXPECT_EQ(s[0].out, "");
  EXPECT_EQ(s[1].out, "");
  EXPECT_EQ(s[2].out, "a");
  EXPECT_EQ(s[3].out, "");
  EXPECT_TRUE(s[3].finished);
}

TEST(StopChecker, FailedPartialMatchIsReleased) {
  StopChecker c(with_stop({"Stop"}), kEos);
  const auto s = feed(c, texts({"St", "ay", "S"}));
  EXPECT_EQ(s[0].out, "");
  EXPECT_EQ(s[1].out, "Stay");
  EXPECT_EQ(s[2].out, "");
  EXPECT_FALSE(s[2].finished);
  EXPECT_EQ(c.flush(), "S");  // released at the end
  EXPECT_FALSE(c.matched_stop().has_value());
}

TEST(StopChecker, LengthReleasesHeldBackText) {
  SamplingParams p = with_stop({"Stop"});
  p.max_tokens = 2;
  StopChecker c(p, kEos);
  const auto s = feed(c, texts({"x", "St"}));
  EXPECT_EQ(s[0].out, "x");
  EXPECT_EQ(s[1].out, "St");
  EXPECT_TRUE(s[1].finished);
  EXPECT_EQ(s[1].reason, "length");
  EXPECT_FALSE(c.matched_stop().has_value());
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, StopOnTheLastAllowedTokenIsStop) {
  SamplingParams p = with_stop({"end"});
  p.max_tokens = 2;
  StopChecker c(p, kEos);
  const auto s = feed(c, texts({"the ", "end"}));
  EXPECT_TRUE(s[1].finished);
  EXPECT_EQ(s[1].reason, "stop");
  EXPECT_EQ(s[0].out + s[1].out, "the ");
}

TEST(StopChecker, EarliestOfSeveralStopStringsWins) {
  StopChecker c(with_stop({"world", "lo"}), kEos);
  const auto s = feed(c, texts({"hello world"}));
  EXPECT_EQ(s[0].out, "hel");
  EXPECT_EQ(c.matched_stop(), "lo");
}

TEST(StopChecker, MultiByteStopString) {
  StopChecker c(with_stop({"。\n"}), kEos);
  const auto s = feed(c, texts({"你好", "。", "\n再见"}));
  EXPECT_EQ(s[0].out, "你好");
  EXPECT_EQ(s[1].out, "");
  EXPECT_EQ(s[2].out, "");
  EXPECT_TRUE(s[2].finished);
}

TEST(StopChecker, StopTokenIds) {
  for (bool include : {false, true}) {
    SamplingParams p;
    p.stop_token_ids = {7, 9};
    p.include_stop_str_in_output = include;
    StopChecker c(p, kEos);
    const auto s = feed(c, {{5, "a"}, {9, "<x>"}, {6, "b"}});
    EXPECT_FALSE(s[0].finished);
    EXPECT_TRUE(s[1].finished);
    EXPECT_EQ(s[1].reason, "stop");
    EXPECT_EQ(s[1].out, include ? "<x>" : "");
    EXPECT_EQ(c.matched_stop(), "9");
  }
}

TEST(StopChecker, StopTokenReleasesHeldBackText) {
  SamplingParams p = with_stop({"Stop"});
  p.stop_token_ids = {7};
  StopChecker c(p, kEos);
  const auto s = feed(c, {{5, "St"}, {7, ""}});
  EXPECT_EQ(s[0].out, "");
  EXPECT_EQ(s[1].out, "St");
  EXPECT_TRUE(s[1].finished);
}

TEST(StopChecker, EosStops) {
  SamplingParams p;
  StopChecker c(p, kEos);
  const auto s = feed(c, {{5, "a"}, {kEos, "</s>"}});
  EXPECT_TRUE(s[1].finished);
  EXPECT_EQ(s[1].reason, "stop");
  EXPECT_EQ(s[1].out, "");
  EXPECT_FALSE(c.matched_stop().has_value());  // eos is not a user stop
}

TEST(StopChecker, IgnoreEosKeepsGoingUntilLength) {
  SamplingParams p;
  p.ignore_eos = true;
  p.max_tokens = 3;
  StopChecker c(p, kEos);
  const auto s = feed(c, {{kEos, ""}, {kEos, ""}, {kEos, ""}});
  EXPECT_FALSE(s[0].finished);
  EXPECT_FALSE(s[1].finished);
  EXPECT_TRUE(s[2].finished);
  EXPECT_EQ(s[2].reason, "length");
}

TEST(StopChecker, IgnoreEosStillHonoursStopTokenIds) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {kEos};
  StopChecker c(p, kEos);
  const auto s = feed(c, {{kEos, ""}});
  EXPECT_TRUE(s[0].finished);
  EXPECT_EQ(c.matched_stop(), std::to_string(kEos));
}

TEST(StopChecker, NothingStopsWithinMinTokens) {
  SamplingParams p = with_stop({"Stop"});
  p.min_tokens = 2;
  p.stop_token_ids = {7};
  StopChecker c(p, kEos);
  const auto s = feed(c, {{kEos, "e"}, {7, "Stop"}, {5, "x"}, {kEos, ""}});
  EXPECT_FALSE(s[0].finished);
  EXPECT_FALSE(s[1].finished);
  EXPECT_FALSE(s[2].finished);
  EXPECT_TRUE(s[3].finished);
  EXPECT_EQ(s[0].out + s[1].out + s[2].out + s[3].out, "eStopx");
}

TEST(StopChecker, StopStringCompletedRightAfterMinTokensCounts) {
  SamplingParams p = with_stop({"Stop"});
  p.min_tokens = 1;
  StopChecker c(p, kEos);
  const auto s = feed(c, texts({"St", "op"}));
  EXPECT_FALSE(s[0].finished);
  EXPECT_TRUE(s[1].finished);
  EXPECT_EQ(s[0].out + s[1].out, "");
}

TEST(StopChecker, NoStopStringsStreamsEverything) {
  SamplingParams p;
  StopChecker c(p, kEos);
  const auto s = feed(c, texts({"Sto", "p"}));
  EXPECT_EQ(s[0].out, "Sto");
  EXPECT_EQ(s[1].out, "p");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, ReasonMayBeNull) {
  SamplingParams p;
  p.max_tokens = 1;
  StopChecker c(p, kEos);
  bool finished = false;
  EXPECT_EQ(c.push(5, "a", &finished, nullptr), "a");
  EXPECT_TRUE(finished);
  EXPECT_EQ(c.finish_reason(), "length");
}

}  // namespace
}  // namespace deepinfer::sample
