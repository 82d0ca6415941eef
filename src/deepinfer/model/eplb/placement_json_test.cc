// The plan and counts files: round trips, and every malformed plan refused naming its field.
#include "deepinfer/model/eplb/placement_json.h"

#include <gtest/gtest.h>

#include "deepinfer/model/eplb/eplb_planner.h"

namespace deepinfer {
namespace {

// 2 layers, 4 experts, 2 ranks of 3 slots: expert 0 (layer 0) and 3 (layer 1) twice.
const char* kPlan = R"({"num_layers": 2, "num_experts": 4, "num_ranks": 2, "slots_per_rank": 3,
  "layers": [[[0, 1, 2], [0, 3, 1]], [[3, 0, 1], [2, 3, 1]]]})";

void expect_refused(const std::string& text, const std::string& needle) {
  auto p = parse_placement_json(text, "plan.json");
  ASSERT_FALSE(p.ok()) << text;
  EXPECT_NE(p.status().message().find("plan.json"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find(needle), std::string::npos)
      << "want '" << needle << "' in: " << p.status().message();
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

TEST(PlacementJson, APlanReadsBackAsWritten) {
  auto p = parse_placement_json(kPlan, "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->replicas(0, 0), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(p->replicas(0, 3), (std::vector<int32_t>{1}));
  EXPECT_TRUE(p->holds(1, 1, 2));
  EXPECT_FALSE(p->holds(0, 1, 2));
  EXPECT_EQ(p->rank_for(0, 0, 0, 0), 0);  // two copies: rows alternate, offset by the sender
  EXPECT_EQ(p->rank_for(0, 0, 0, 1), 1);
  EXPECT_EQ(p->rank_for(0, 0, 1, 0), 1);
  auto back = parse_placement_json(placement_to_json(*p), "again");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  for (int l = 0; l < 2; ++l)
    for (int r = 0; r < 2; ++r) EXPECT_EQ(back->experts_on(l, r), p->experts_on(l, r));
}

TEST(PlacementJson, AMalformedPlanIsRefusedNamingTheField) {
  expect_refused("{", "not valid JSON");
  expect_refused("[]", "expected a JSON object");
  expect_refused(replace(kPlan, R"("num_ranks": 2,)", ""), "num_ranks: missing");
  expect_refused(replace(kPlan, R"("num_experts": 4)", R"("num_experts": "4")"), "num_experts");
  expect_refused(replace(kPlan, R"("slots_per_rank": 3)", R"("slots_per_rank": 0)"),
                 "slots_per_rank");
  expect_refused(replace(kPlan, "[[3, 0, 1], [2, 3, 1]]", "[[3, 0, 1]]"), "layers[1]: 1 entries");
  expect_refused(replace(kPlan, "[2, 3, 1]", "[2, 3]"), "layers[1][1]: 2 entries");
  expect_refused(replace(kPlan, "[2, 3, 1]", "[2, 3, 7]"), "layers[1][1]: expert 7 is outside");
  expect_refused(replace(kPlan, "[2, 3, 1]", "[2, 3, 3]"), "layers[1][1]: expert 3 is twice");
  expect_refused(replace(kPlan, "[0, 3, 1]", "[0, 1, 2]"), "layers[0]: expert 3 has no replica");
  expect_refused(replace(kPlan, "[0, 3, 1]", "[0, 3, 1.5]"), "layers[0][1]");
  expect_refused(replace(kPlan, R"("num_layers": 2)", R"("num_layers": 3)"), "layers: 2 entries");
}

TEST(PlacementJson, APlanForAnotherShapeDoesNotFit) {
  auto p = parse_placement_json(kPlan, "plan.json");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(check_placement_fits(*p, 2, 4, 2).ok());
  EXPECT_NE(check_placement_fits(*p, 3, 4, 2).message().find("num_layers is 2"), std::string::npos);
  EXPECT_NE(check_placement_fits(*p, 2, 8, 2).message().find("num_experts is 4"),
            std::string::npos);
  EXPECT_NE(check_placement_fits(*p, 2, 4, 3).message().find("num_ranks is 2"), std::string::npos);
}

TEST(PlacementJson, CountsRoundTripAndBadCountsAreNamed) {
  const RoutingCounts c = {{1, 2, 3}, {0, 5, 18446744073709551615ull}};
  auto back = parse_counts_json(counts_to_json(c), "counts.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, c);
  auto neg = parse_counts_json(R"({"num_layers":1,"num_experts":2,"counts":[[1,-1]]})", "c.json");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("c.json: counts[0]"), std::string::npos);
  auto shape = parse_counts_json(R"({"num_layers":2,"num_experts":2,"counts":[[1,1]]})", "c.json");
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("counts: 1 entries"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
