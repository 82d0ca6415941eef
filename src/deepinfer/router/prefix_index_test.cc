#include "deepinfer/router/prefix_index.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::router {
namespace {

using V = std::vector<size_t>;

TEST(PrefixIndex, MatchIsEachWorkersLongestServedPrefix) {
  PrefixIndex index(3, 1000);
  index.insert("hello world", 0);
  index.insert("hello there", 1);
  EXPECT_EQ(index.match("hello world!"), (V{11, 6, 0}));
  EXPECT_EQ(index.match("hello thud"), (V{6, 8, 0}));
  EXPECT_EQ(index.match("help"), (V{3, 3, 0}));
  EXPECT_EQ(index.match("xyz"), (V{0, 0, 0}));
  EXPECT_EQ(index.match(""), (V{0, 0, 0}));
}

TEST(PrefixIndex, SplittingKeepsEachWorkersBytes) {
  PrefixIndex index(2, 1000);
  index.insert("abcdef", 0);
  EXPECT_EQ(index.chars(0), 6u);
  EXPECT_EQ(index.num_nodes(), 1u);
  index.insert("abcxyz", 1);  // "abc" splits off: abc -> {def, xyz}
  EXPECT_EQ(index.num_nodes(), 3u);
  EXPECT_EQ(index.chars(0), 6u);
  EXPECT_EQ(index.chars(1), 6u);
  index.insert("abcdef", 1);  // worker 1 now lists def too
  EXPECT_EQ(index.chars(1), 9u);
  EXPECT_EQ(index.match("abcdefg"), (V{6, 6}));
}

TEST(PrefixIndex, EvictsTheOldestLeavesPastTheCap) {
  PrefixIndex index(1, 10);
  index.insert("aaaa", 0);  // tick 1
  index.insert("bbbb", 0);  // tick 2
  EXPECT_EQ(index.chars(0), 8u);
  index.insert("cccc", 0);  // 12 > 10: "aaaa", the oldest leaf, goes
  EXPECT_EQ(index.chars(0), 8u);
  EXPECT_EQ(index.match("aaaa"), (V{0}));
  EXPECT_EQ(index.match("bbbb"), (V{4}));
  EXPECT_EQ(index.match("cccc"), (V{4}));
  EXPECT_EQ(index.num_nodes(), 2u);
}

TEST(PrefixIndex, EvictionTakesLeavesBeforeTheirParents) {
  PrefixIndex index(1, 9);
  index.insert("abc123", 0);  // tick 1
  index.insert("abc456", 0);  // tick 2: abc -> {123, 456}, 9 bytes
  index.insert("zz", 0);      // tick 3: 11 > 9; "123" (tick 1) goes, abc (tick 2) stays
  EXPECT_EQ(index.chars(0), 8u);
  EXPECT_EQ(index.match("abc123"), (V{3}));
  EXPECT_EQ(index.match("abc456"), (V{6}));
}

TEST(PrefixIndex, EvictionOfOneWorkerLeavesTheOthers) {
  PrefixIndex index(2, 4);
  index.insert("abcd", 0);
  index.insert("abcd", 1);
  index.insert("wxyz", 0);  // worker 0 over its cap: drops "abcd", worker 1 keeps it
  EXPECT_EQ(index.match("abcd"), (V{0, 4}));
  EXPECT_EQ(index.chars(0), 4u);
  EXPECT_EQ(index.chars(1), 4u);
}

TEST(PrefixIndex, RemoveWorkerForgetsItsPrefixesAndFreesUnlistedNodes) {
  PrefixIndex index(2, 1000);
  index.insert("shared prefix A", 0);
  index.insert("shared prefix B", 1);
  index.insert("only zero", 0);
  index.remove_worker(0);
  EXPECT_EQ(index.chars(0), 0u);
  EXPECT_EQ(index.match("shared prefix A"), (V{0, 14}));
  EXPECT_EQ(index.match("only zero"), (V{0, 0}));
  EXPECT_EQ(index.num_nodes(), 2u);  // "shared prefix " -> "B"; "A" and "only zero" are gone
}

}  // namespace
}  // namespace deepinfer::router
