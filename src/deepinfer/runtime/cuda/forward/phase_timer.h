// Optional GPU time per phase of a forward (bench --phase-times): events recorded on the stream
// between phases; once the stream has synchronized, the time between consecutive marks goes to
// the phase that ended at the later one. Only eager launches are timed (a step replayed from a
// CUDA graph has no marks), so turning it on makes decode run eagerly.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace deepinfer::cuda {

class PhaseTimer {
 public:
  PhaseTimer() = default;
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  void begin(cudaStream_t stream);                    // a step's first mark
  void mark(const char* phase, cudaStream_t stream);  // the work since the last mark was `phase`
  void collect();  // after the stream synchronized: add up this step's phases
  const std::map<std::string, double>& totals_ms() const { return totals_; }
  void clear() { totals_.clear(); }

 private:
  cudaEvent_t next_event();
  std::vector<cudaEvent_t> events_;  // reused across steps
  size_t used_ = 0;
  std::vector<const char*> labels_;  // labels_[i]: the phase ending at events_[i + 1]
  std::map<std::string, double> totals_;
};

}  // namespace deepinfer::cuda
