// Test helpers shared by the engine's test binaries.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/engine/engine.h"

namespace deepinfer::testing {

// A randomized test's seed: $env when set (to replay a failure), else a fresh one; printed
// either way so a failure can be replayed.
inline uint64_t printed_test_seed(const char* env, const char* what) {
  const char* s = std::getenv(env);
  const uint64_t v = s ? std::strtoull(s, nullptr, 10) : std::random_device{}();
  std::printf("%s seed: %llu (replay: %s=%llu)\n", what, static_cast<unsigned long long>(v), env,
              static_cast<unsigned long long>(v));
  return v;
}

// Submits all requests at once (ids r0, r1, ...) and waits for every final output, in
// submission order.
inline std::vector<RequestOutput> run_batch(Engine& e, std::vector<GenerateRequest> reqs) {
  std::mutex m;
  std::condition_variable cv;
  std::vector<RequestOutput> outs(reqs.size());
  size_t done = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].request_id = "r" + std::to_string(i);
    Status st = e.submit(reqs[i], [&, i](const RequestOutput& o) {
      if (!o.finished) return;
      std::lock_guard<std::mutex> lock(m);
      outs[i] = o;
      ++done;
      cv.notify_all();
    });
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(m);
      ++done;  // never answered: don't wait for it
    }
  }
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return done == reqs.size(); });
  return outs;
}

}  // namespace deepinfer::testing
