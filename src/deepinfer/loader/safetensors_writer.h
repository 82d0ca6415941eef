// Writes standard safetensors files (and sharded checkpoints with an index). Used by
// make-tiny-model and by tests; not on any load path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer {

struct TensorRecord {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // numel * dtype_size bytes; packed FP4 is I8/U8 with byte shape
};

class SafetensorsWriter {
 public:
  void add(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  void add(TensorRecord record) { tensors_.push_back(std::move(record)); }
  const std::vector<TensorRecord>& tensors() const { return tensors_; }

  // 8-byte LE header length, JSON header padded with spaces so the data section starts 8-byte
  // aligned, then tensors sorted by name, contiguous. invalid_argument on a duplicate name or a
  // byte count that does not match the shape; the file appears atomically (temp + rename).
  Status write(const std::string& path,
               const std::map<std::string, std::string>& metadata = {}) const;

 private:
  std::vector<TensorRecord> tensors_;
};

// A tensor known before its bytes exist: what shard planning and a streaming writer need.
struct PlannedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

// Where each tensor of a sharded checkpoint goes. Tensors are sorted by name and packed greedily
// into shards of at most max_shard_bytes of data (a tensor larger than that gets a shard of its
// own), named model-00001-of-0000N.safetensors.
struct ShardPlan {
  std::vector<PlannedTensor> tensors;       // sorted by name
  std::vector<std::vector<size_t>> shards;  // indices into tensors, per shard, in order
  std::vector<std::string> files;           // one file name per shard
  uint64_t total_bytes = 0;
};
// invalid_argument on a duplicate name. An empty list is one empty shard.
StatusOr<ShardPlan> plan_shards(std::vector<PlannedTensor> tensors, size_t max_shard_bytes);
// model.safetensors.index.json {"metadata": {"total_size"}, "weight_map"} for the plan.
Status write_shard_index(const std::string& dir, const ShardPlan& plan);

// Writes every tensor at once as plan_shards lays them out, plus the index. Creates dir.
Status write_sharded_safetensors(const std::string& dir, std::vector<TensorRecord> tensors,
                                 size_t max_shard_bytes,
                                 const std::map<std::string, std::string>& metadata = {});

}  // namespace deepinfer
