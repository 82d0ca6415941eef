// libFuzzer target: SafetensorsFile::parse_buffer must return a Status for any bytes, and every
// tensor it accepts must be a well-formed view inside the buffer.
#include <cstdint>
#include <cstdlib>

#include "deepinfer/loader/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = deepinfer::SafetensorsFile::parse_buffer(data, size, "fuzz-input");
  if (!file.ok()) {
    if (file.status().message().empty()) std::abort();
    return 0;
  }
  const uint8_t* end = data + size;
  const std::string* prev = nullptr;
  for (const deepinfer::TensorInfo& t : (*file)->tensors()) {
    if (t.data < data || t.data > end || t.nbytes > static_cast<size_t>(end - t.data)) std::abort();
    if (static_cast<size_t>(t.numel()) * deepinfer::dtype_size(t.dtype) != t.nbytes) std::abort();
    if (prev != nullptr && !(*prev < t.name)) std::abort();  // sorted, unique
    if ((*file)->find(t.name) != &t) std::abort();
    prev = &t.name;
    // Touch both ends so ASan checks the view really is readable.
    if (t.nbytes > 0) {
      volatile uint8_t sink = t.data[0] ^ t.data[t.nbytes - 1];
      (void)sink;
    }
  }
  return 0;
}
