// The GPUs as nvidia-smi reports them, and what precheck says of each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/cli/precheck/check_result.h"

namespace deepinfer::cli::precheck {

// The query precheck runs; its output is what parse_gpu_csv reads.
inline constexpr const char* kNvidiaSmiQuery =
    "nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version "
    "--format=csv,noheader,nounits";

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int64_t memory_mib = 0;
  std::string driver;
};

// One GPU a line: "0, NVIDIA H200, 9.0, 143771, 580.95.05". Errors name the line and field.
StatusOr<std::vector<GpuInfo>> parse_gpu_csv(std::string_view text);

// SM90 (H100/H200) and SM100 pass; any other GPU warns, naming it; no GPU warns (the CPU
// backend still runs). One result per GPU, plus the driver.
std::vector<CheckResult> gpu_checks(const std::vector<GpuInfo>& gpus);

}  // namespace deepinfer::cli::precheck
