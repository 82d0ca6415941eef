#include "deepinfer/kv/page_spec.h"

#include <gtest/gtest.h>

namespace deepinfer::kv {
namespace {

TEST(PageSpec, PagesForTokensRoundsUp) {
  PageSpec s;
  s.page_tokens = 128;
  EXPECT_EQ(s.pages_for_tokens(0), 0);
  EXPECT_EQ(s.pages_for_tokens(-1), 0);
  EXPECT_EQ(s.pages_for_tokens(1), 1);
  EXPECT_EQ(s.pages_for_tokens(128), 1);
  EXPECT_EQ(s.pages_for_tokens(129), 2);
  EXPECT_EQ(s.pages_for_tokens(int64_t{1} << 20), 8192);
}

}  // namespace
}  // namespace deepinfer::kv
