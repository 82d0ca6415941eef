// The CPU runner: a family's reference model (deepseek_v4 or deepseek_v41 CpuModel, through
// paged_model.h) over a page pool in host memory. Pages are that family's StateLayout pages
// (128 tokens); a step runs its rows one after another.
#pragma once

#include <memory>

#include "deepinfer/base/status.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer::runtime::cpu {

// The pool gets options.kv_memory_bytes (errors name --kv-memory when it can't hold one
// sequence).
StatusOr<std::unique_ptr<ModelRunner>> create_cpu_runner(const RunnerOptions& options);

}  // namespace deepinfer::runtime::cpu
