#include "deepinfer/runtime/cuda/forward/phase_timer.h"

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::cuda {

PhaseTimer::~PhaseTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t PhaseTimer::next_event() {
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    DI_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[used_++];
}

void PhaseTimer::begin(cudaStream_t stream) {
  used_ = 0;
  labels_.clear();
  DI_CUDA_CHECK(cudaEventRecord(next_event(), stream));
}

void PhaseTimer::mark(const char* phase, cudaStream_t stream) {
  if (used_ == 0) return;  // not begun: nothing to time against
  DI_CUDA_CHECK(cudaEventRecord(next_event(), stream));
  labels_.push_back(phase);
}

void PhaseTimer::collect() {
  for (size_t i = 0; i < labels_.size(); ++i) {
    float ms = 0;
    DI_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
    totals_[labels_[i]] += ms;
  }
  used_ = 0;
  labels_.clear();
}

}  // namespace deepinfer::cuda
