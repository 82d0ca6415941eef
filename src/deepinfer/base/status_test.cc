#include "deepinfer/base/status.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return invalid_argument("x is odd: " + std::to_string(x));
  return x / 2;
}

Status UseHalf(int x, int* out) {
  ASSIGN_OR_RETURN(*out, Half(x));
  return ok_status();
}

TEST(StatusTest, PropagatesErrorsWithContext) {
  int v = 0;
  EXPECT_TRUE(UseHalf(4, &v).ok());
  EXPECT_EQ(v, 2);
  Status st = UseHalf(3, &v).with_context("layer 7");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "layer 7: x is odd: 3");
  EXPECT_EQ(st.to_string(), "INVALID_ARGUMENT: layer 7: x is odd: 3");
}

}  // namespace
}  // namespace deepinfer
