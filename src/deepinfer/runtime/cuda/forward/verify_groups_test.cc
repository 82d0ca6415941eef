// for_verify_groups (paged_forward.h): how verify_paged splits its sequences into forwards. Plain
// C++, so it runs in CI without a GPU.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "deepinfer/runtime/cuda/forward/paged_forward.h"

namespace deepinfer::cuda {
namespace {

using Group = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // first, sequences, row, rows

std::vector<Group> groups(const std::vector<int64_t>& counts, int64_t max_seqs, int64_t max_rows,
                          Status* st) {
  std::vector<Group> out;
  *st = for_verify_groups(counts.data(), int64_t(counts.size()), max_seqs, max_rows,
                          [&](int64_t b0, int64_t n, int64_t row0, int64_t rows) {
                            out.emplace_back(b0, n, row0, rows);
                            return ok_status();
                          });
  return out;
}

TEST(VerifyGroups, ConsecutiveRunsWithinBothLimits) {
  Status st;
  // Rows: 3 + 3 fit 6, the next 3 starts a group; at most 2 sequences a group.
  EXPECT_EQ(groups({3, 3, 3, 1, 1}, 2, 6, &st),
            (std::vector<Group>{{0, 2, 0, 6}, {2, 2, 6, 4}, {4, 1, 10, 1}}));
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(groups({6, 1, 5}, 8, 6, &st), (std::vector<Group>{{0, 1, 0, 6}, {1, 2, 6, 6}}));
  EXPECT_TRUE(st.ok());
}

TEST(VerifyGroups, ASequenceLongerThanAForwardIsRefusedBeforeAnyRuns) {
  Status st;
  EXPECT_TRUE(groups({2, 7, 1}, 4, 6, &st).empty());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sequence 1 has 7 ids"), std::string::npos) << st.to_string();
  EXPECT_TRUE(groups({2, 0}, 4, 6, &st).empty());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

TEST(VerifyGroups, AFailedGroupStopsTheRest) {
  const std::vector<int64_t> counts = {1, 1, 1};
  int calls = 0;
  const Status st =
      for_verify_groups(counts.data(), 3, 1, 4, [&](int64_t, int64_t, int64_t, int64_t) {
        ++calls;
        return internal_error("device");
      });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace deepinfer::cuda
