// The CUDA runner: the deepseek_v4 GPU forward (forward/cuda_model.h) behind the engine's
// ModelRunner seam. In this first version a page is a whole sequence slot of the forward (see
// README.md): page p is slot p, one page covers max_model_len tokens, and the pool holds as many
// slots as --gpu-memory-utilization leaves room for after the weights.
#pragma once

#include <memory>

#include "deepinfer/base/status.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer::runtime::cuda {

// Plain numerics only (kAuto and kPlain; kOfficial is unimplemented). Errors name the flag:
// --gpu-memory-utilization when not even one slot fits, --max-model-len beyond what the ops
// serve; load errors name the file and tensor.
StatusOr<std::unique_ptr<ModelRunner>> create_cuda_runner(const RunnerOptions& options);

}  // namespace deepinfer::runtime::cuda
