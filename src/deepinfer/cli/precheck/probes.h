// What `deepinfer precheck` looks at on this machine, one probe a concern. Each returns its
// result lines; none throws or exits.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/cli/precheck/check_result.h"
#include "deepinfer/cli/precheck/gpu_query.h"

namespace deepinfer::cli::precheck {

// A shell command's standard output, or nullopt when it could not run or exited non-zero.
std::optional<std::string> command_output(const std::string& command);

// The toolchain and Debian packages a rebuild needs (warn: this binary already runs without).
std::vector<CheckResult> build_tool_checks();
// The GPUs nvidia-smi lists (kNvidiaSmiQuery); none when it is absent. Unparsable output is a
// warning appended to `problems`.
std::vector<GpuInfo> query_gpus(std::vector<CheckResult>* problems);
// CUDA toolkit (nvcc), driver and `gpus`, NCCL and UCX.
std::vector<CheckResult> gpu_stack_checks(const std::vector<GpuInfo>& gpus);
// The model's weights against host memory (cpu: they are held as fp32) or the largest of `gpus`
// (cuda: as stored), and free disk where the model lives. Missing or unreadable: fail.
std::vector<CheckResult> model_checks(const std::string& model_dir, bool cuda,
                                      const std::vector<GpuInfo>& gpus);
// PING over TCP to redis://host:port. Unreachable: fail.
CheckResult redis_check(const std::string& url);

}  // namespace deepinfer::cli::precheck
