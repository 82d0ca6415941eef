#include "deepinfer/kv/block_pool.h"

#include <gtest/gtest.h>

namespace deepinfer::kv {
namespace {

TEST(BlockPool, AllocatesEveryPageOnceThenRunsOut) {
  BlockPool pool(3);
  EXPECT_EQ(pool.num_total(), 3);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.num_free(), 0);
  for (int32_t p = 0; p < 3; ++p) EXPECT_EQ(pool.refcount(p), 1);
}

TEST(BlockPool, PageFreedOnlyByLastRelease) {
  BlockPool pool(2);
  const int32_t a = *pool.allocate();
  pool.retain(a);
  pool.retain(a);
  EXPECT_EQ(pool.refcount(a), 3);
  pool.release(a);
  pool.release(a);
  EXPECT_EQ(pool.refcount(a), 1);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(a);
  EXPECT_EQ(pool.refcount(a), 0);
  EXPECT_EQ(pool.num_free(), 2);
  // The released page is handed out again before untouched ones.
  EXPECT_EQ(pool.allocate(), a);
}

TEST(BlockPool, EmptyPool) {
  BlockPool pool(0);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.num_total(), 0);
}

TEST(BlockPoolDeathTest, ReleasingAFreePageIsABug) {
  BlockPool pool(1);
  EXPECT_DEATH(pool.release(0), "CHECK failed");
  EXPECT_DEATH(pool.retain(0), "CHECK failed");
}

}  // namespace
}  // namespace deepinfer::kv
