#include "deepinfer/runtime/device.h"

#include <cstdlib>

namespace deepinfer::runtime {

StatusOr<Device> parse_device(const std::string& s, const std::string& what) {
  if (s == "cpu") return Device::kCpu;
  if (s == "cuda" || s == "nvidia") return Device::kCuda;
  return invalid_argument(what + " must be cpu or cuda (nvidia), got '" + s + "'");
}

StatusOr<Device> default_device() {
  const char* env = std::getenv("DEEPINFER_ACCELERATOR");
  if (env == nullptr || *env == '\0') return Device::kCpu;
  return parse_device(env, "DEEPINFER_ACCELERATOR");
}

const char* device_name(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

}  // namespace deepinfer::runtime
