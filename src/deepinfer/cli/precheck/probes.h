// What `deepinfer precheck` looks at on this machine, one probe a concern. Each returns its
// result lines; none throws or exits.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/cli/precheck/check_result.h"

namespace deepinfer::cli::precheck {

// A shell command's standard output, or nullopt when it could not run or exited non-zero.
std::optional<std::string> command_output(const std::string& command);

// The toolchain and Debian packages a rebuild needs (warn: this binary already runs without).
std::vector<CheckResult> build_tool_checks();
// CUDA toolkit (nvcc), driver and GPUs, NCCL and UCX.
std::vector<CheckResult> gpu_stack_checks();
// The model's weights against host memory (cpu: they are held as fp32) or the largest GPU
// (cuda: as stored), and free disk where the model lives. Missing or unreadable: fail.
std::vector<CheckResult> model_checks(const std::string& model_dir, bool cuda);
// PING over TCP to redis://host:port. Unreachable: fail.
CheckResult redis_check(const std::string& url);

}  // namespace deepinfer::cli::precheck
