// A model directory: one or more safetensors shards, looked up by canonical tensor name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/safetensors_file.h"
#include "deepinfer/loader/tensor_info.h"

namespace deepinfer {

class Checkpoint {
 public:
  // dir holds model.safetensors.index.json (+ the shards it names), else model.safetensors,
  // else (fallback) any *.safetensors files. Every shard is mapped and validated up front.
  // Errors: not_found (no dir / no safetensors / index names a missing shard or a tensor its
  // shard lacks), data_loss (corrupt file or index; the same canonical tensor twice, in one
  // shard under both spellings or across shards).
  static StatusOr<std::unique_ptr<Checkpoint>> open(const std::string& dir);

  // By canonical (Hub, bare) name; an on-disk spelling is canonicalized first. nullptr if absent.
  const TensorInfo* find(std::string_view canonical_name) const;
  std::vector<std::string> canonical_names() const;  // sorted
  const std::string& dir() const { return dir_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  Checkpoint() = default;
  Status add_file(std::unique_ptr<SafetensorsFile> file);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*, std::less<>> by_name_;  // canonical -> tensor
};

}  // namespace deepinfer
