#include <cstdlib>
#include <cstring>

#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("DEEPINFER_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

}  // namespace deepinfer::cuda
