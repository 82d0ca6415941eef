// Writes a sharded safetensors checkpoint too large to hold in memory: tensors are produced on
// demand, in parallel, one shard at a time, and each shard is written while the next is made.
// Same files and index as write_sharded_safetensors() for the same tensors and shard size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/safetensors_writer.h"

namespace deepinfer {

class ThreadPool;

// Where a streaming write stands; reported after each shard is written.
struct StreamingWriteProgress {
  size_t shards_written = 0, shards = 0;
  size_t tensors_written = 0, tensors = 0;
  uint64_t bytes_written = 0, total_bytes = 0;
  double seconds = 0;  // since the write began
  // Memory: shards whose tensors are held (one being made, one being written) and the most
  // tensor bytes ever held for shards at once (makers' scratch is not counted).
  size_t max_shards_held = 0;
  uint64_t max_bytes_held = 0;
};

// One generation unit's tensors (e.g. a weight and its scale). Called from several threads at
// once, and more than once for a unit whose tensors fall in two shards: it must return the
// same bytes every time (the copy for the other shard is dropped rather than held).
using MakeTensorGroup = std::function<StatusOr<std::vector<TensorRecord>>(size_t group)>;

struct StreamingWriteOptions {
  size_t max_shard_bytes = size_t{4} << 30;
  std::map<std::string, std::string> metadata;  // every shard's __metadata__
  ThreadPool* pool = nullptr;                   // makers run here; null: the default pool
  std::function<void(const StreamingWriteProgress&)> progress;  // one call at a time
};

// tensors[i] is made by make(group_of[i]). Writes the shards of plan_shards(tensors) into dir
// (created), then the index. Errors: a maker's error, a made tensor that is not the planned one
// (internal), a write failure (resource_exhausted, naming the file).
StatusOr<StreamingWriteProgress> write_sharded_streaming(const std::string& dir,
                                                         std::vector<PlannedTensor> tensors,
                                                         const std::vector<size_t>& group_of,
                                                         const MakeTensorGroup& make,
                                                         const StreamingWriteOptions& options);

}  // namespace deepinfer
