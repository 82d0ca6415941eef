// One safetensors file: mmap'd read-only, header parsed and fully validated at open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/mapped_file.h"
#include "deepinfer/loader/tensor_info.h"

namespace deepinfer {

// Format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to its start.
//
// Validation (errors name the file and, where there is one, the tensor): file shorter than 8
// bytes or than 8 + N, invalid JSON or a header that is not an object, duplicate names, missing
// or malformed dtype/shape/data_offsets, unknown dtype (unimplemented), begin > end, tensors
// overlapping or extending past the data section, nbytes != numel * dtype_size, non-string
// metadata. Corruption is kDataLoss. Gaps between tensors are accepted.
class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses a caller-owned buffer that must outlive the result (no mmap; fuzzer and tests).
  static StatusOr<std::unique_ptr<SafetensorsFile>> parse_buffer(const uint8_t* data, size_t size,
                                                                 std::string label);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(std::string_view name) const;                 // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& label() const { return label_; }

 private:
  SafetensorsFile() = default;
  Status parse(const uint8_t* data, size_t size);

  std::unique_ptr<MappedFile> mapping_;  // null for parse_buffer
  std::string label_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace deepinfer
