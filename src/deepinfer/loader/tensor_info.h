// A tensor as stored in a safetensors file: a view into the mapped bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer {

// Valid while the SafetensorsFile / Checkpoint that produced it lives.
struct TensorInfo {
  std::string name;  // as stored on disk
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  // path (or label) of the shard it lives in, for error messages

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// "[2, 3]" for error messages.
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace deepinfer
