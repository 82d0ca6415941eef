#include "deepinfer/runtime/cuda/forward/decode_graphs.h"

#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/device_buffer.h"

namespace deepinfer::cuda {

DecodeGraphs::~DecodeGraphs() { clear(); }

void DecodeGraphs::clear() {
  for (auto& [bucket, e] : entries_)
    if (e.exec) cudaGraphExecDestroy(e.exec);
  entries_.clear();
}

void DecodeGraphs::run(int64_t bucket, cudaStream_t stream, const std::function<void()>& step) {
  Entry& e = entries_[bucket];
  const uint64_t now = regrowth_count();
  if (e.exec && e.graph_epoch != now) {
    DI_CUDA_CHECK(cudaGraphExecDestroy(e.exec));
    e.exec = nullptr;
  }
  if (!e.exec && (!e.warm || e.warm_epoch != now)) {
    step();
    e.warm = true;
    e.warm_epoch = regrowth_count();
    ++stats_.eager;
    return;
  }
  if (!e.exec) {
    cudaGraph_t graph = nullptr;
    // Thread-local mode: a stray synchronizing call inside the step fails the capture loudly.
    DI_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    step();
    DI_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    if (regrowth_count() != now) {
      std::fprintf(stderr, "DecodeGraphs: a buffer was reallocated while capturing bucket %lld\n",
                   static_cast<long long>(bucket));
      std::abort();
    }
    DI_CUDA_CHECK(cudaGraphInstantiate(&e.exec, graph, 0));
    DI_CUDA_CHECK(cudaGraphDestroy(graph));
    e.graph_epoch = now;
    ++stats_.captured;
  } else {
    ++stats_.replayed;
  }
  DI_CUDA_CHECK(cudaGraphLaunch(e.exec, stream));
}

}  // namespace deepinfer::cuda
