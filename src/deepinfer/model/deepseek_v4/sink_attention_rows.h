// The per-(query, head) sink attention both families' CPU attention runs after their state
// updates: query t of a chunk at pos0 attends the window positions max(0, s - window + 1) .. s
// (window_row(pos)), then whatever entries(t, &keys) appends (compressed entries), in one softmax
// with the head's sink; the output's rotary part is de-rotated at s. Parallel over every
// (query, head) job.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v4/rope.h"

namespace deepinfer::v4 {

// q, o: [n, nh, hd]; sinks: [nh].
template <typename WindowRow, typename Entries>
void sink_attention_rows(const float* q, int64_t n, int nh, int hd, int rd, int window,
                         int64_t pos0, const float* sinks, float scale, const RopeTable& rope,
                         WindowRow window_row, Entries entries, float* o) {
  ThreadPool::default_pool().parallel_for(n * nh, 1, [&](int64_t b, int64_t e) {
    std::vector<const float*> keys;
    for (int64_t job = b; job < e; ++job) {
      const int64_t t = job / nh, s = pos0 + t;
      const int hh = static_cast<int>(job % nh);
      keys.clear();
      for (int64_t pos = std::max<int64_t>(0, s - (window - 1)); pos <= s; ++pos)
        keys.push_back(window_row(pos));
      entries(t, &keys);
      float* oh = &o[job * hd];
      cpu::sink_attention(&q[job * hd], keys.data(), static_cast<int64_t>(keys.size()), sinks[hh],
                          hd, scale, oh);
      rope.rotate(oh + hd - rd, s, /*inverse=*/true);
    }
  });
}

}  // namespace deepinfer::v4
