// Which backend runs the model. The default comes from DEEPINFER_ACCELERATOR (nvidia | cpu), as
// in DeepSeek's engine; every CLI has --device to override it.
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::runtime {

enum class Device { kCpu, kCuda };

// "cpu"; "cuda" or "nvidia" (the DEEPINFER_ACCELERATOR spelling). Errors name `what`.
StatusOr<Device> parse_device(const std::string& s, const std::string& what = "--device");
// DEEPINFER_ACCELERATOR when set (an unknown value is an error naming it), else cpu.
StatusOr<Device> default_device();
const char* device_name(Device d);  // "cpu" | "cuda"

}  // namespace deepinfer::runtime
