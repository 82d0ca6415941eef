#include "deepinfer/runtime/cpu/cpu_runner.h"
#include "deepinfer/runtime/model_runner.h"
#if DEEPINFER_HAS_CUDA
#include "deepinfer/runtime/cuda/cuda_runner.h"
#endif

namespace deepinfer::runtime {

StatusOr<std::unique_ptr<ModelRunner>> create_runner(const RunnerOptions& options) {
  if (options.device == Device::kCpu) return cpu::create_cpu_runner(options);
#if DEEPINFER_HAS_CUDA
  return cuda::create_cuda_runner(options);
#else
  return unimplemented(
      "--device cuda: this binary was built without the CUDA backend (build where nvcc is, "
      "with -DDEEPINFER_CUDA=ON)");
#endif
}

}  // namespace deepinfer::runtime
