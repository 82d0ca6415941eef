// Decode steps replayed from CUDA graphs, one per batch bucket. A step's launches are fixed by
// its bucket (row count); its per-step inputs live in device buffers the caller fills before
// each run, so one captured graph serves every later step of that bucket.
//
// A graph holds the raw device pointers of the scratch it was captured with, so it is valid only
// while regrowth_count() (device_buffer.h) has not moved. That count is process-wide: a
// reallocation anywhere (another model's scratch too) drops the graph, which costs a re-capture,
// never a stale pointer. A bucket's first step (and the first after a reallocation) runs
// eagerly, which sizes every buffer and builds the GEMM plans; the next is captured, then
// replayed from then on.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>

namespace deepinfer::cuda {

struct DecodeGraphStats {
  int64_t eager = 0, captured = 0, replayed = 0;  // steps run each way
};

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Runs `step` (launches on `stream` only, no host sync) for this bucket: eagerly, or from its
  // graph (capturing it first when the bucket is warm and has none).
  void run(int64_t bucket, cudaStream_t stream, const std::function<void()>& step);
  void clear();
  const DecodeGraphStats& stats() const { return stats_; }

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    uint64_t graph_epoch = 0;  // regrowth_count() at capture
    bool warm = false;
    uint64_t warm_epoch = 0;  // regrowth_count() after the eager step
  };
  std::map<int64_t, Entry> entries_;
  DecodeGraphStats stats_;
};

}  // namespace deepinfer::cuda
