#include "deepinfer/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace deepinfer {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 7, 100, 10007}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

}  // namespace
}  // namespace deepinfer
