// What programmatic dependent launch saves on a chain of small dependent kernels in a CUDA graph
// (decision 0022): kernels of 1, 16, 64 and 512 blocks, each reading what the one before it wrote,
// replayed as one graph, launched plainly, with PDL (wait, then release: pdl_grid_begin) and with
// PDL but no early release. Prints the time per kernel of each, and PDL's saving against plain.
// A decode step of v4-flash-8layer is about 350 such launches (docs/gpu_next_b1/run6_h100).
// Usage: pdl_chain_bench [KERNELS]    (default 350)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace {

using deepinfer::cuda::pdl_grid_begin;

enum Mode { kPlain, kWaitRelease, kWaitOnly };

template <Mode M>
__global__ void step_kernel(const float* in, float* out, int n, int work) {
  if constexpr (M == kWaitRelease) pdl_grid_begin();  // what every kernel of the model runs
  if constexpr (M == kWaitOnly) asm volatile("griddepcontrol.wait;" ::: "memory");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = in[i];
  for (int k = 0; k < work; ++k) v = v * 0.999f + 0.001f;
  out[i] = v + 1.0f;
}

// Microseconds a kernel over `reps` replays of a graph of `kernels` launches.
template <Mode M>
float chain_us(float* a, float* b, int kernels, int work, cudaStream_t s) {
  constexpr int kThreads = 256, kGrids[4] = {1, 16, 64, 512};
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DI_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kernels; ++k) {
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = kGrids[k % 4];
    config.blockDim = kThreads;
    config.stream = s;
    config.attrs = &attr;
    config.numAttrs = M == kPlain ? 0 : 1;
    const float* in = k % 2 ? b : a;
    float* out = k % 2 ? a : b;
    DI_CUDA_CHECK(
        cudaLaunchKernelEx(&config, step_kernel<M>, in, out, kGrids[k % 4] * kThreads, work));
  }
  DI_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DI_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int w = 0; w < 5; ++w) DI_CUDA_CHECK(cudaGraphLaunch(exec, s));
  cudaEvent_t e0, e1;
  DI_CUDA_CHECK(cudaEventCreate(&e0));
  DI_CUDA_CHECK(cudaEventCreate(&e1));
  constexpr int kReps = 50;
  DI_CUDA_CHECK(cudaEventRecord(e0, s));
  for (int r = 0; r < kReps; ++r) DI_CUDA_CHECK(cudaGraphLaunch(exec, s));
  DI_CUDA_CHECK(cudaEventRecord(e1, s));
  DI_CUDA_CHECK(cudaStreamSynchronize(s));
  float ms = 0;
  DI_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  DI_CUDA_CHECK(cudaEventDestroy(e0));
  DI_CUDA_CHECK(cudaEventDestroy(e1));
  DI_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DI_CUDA_CHECK(cudaGraphDestroy(graph));
  return 1000.0f * ms / kReps / kernels;
}

}  // namespace

int main(int argc, char** argv) {
  const int kernels = argc > 1 ? std::atoi(argv[1]) : 350;
  if (kernels < 2) {
    std::fprintf(stderr, "pdl_chain_bench: KERNELS must be at least 2 (got %s)\n", argv[1]);
    return 2;
  }
  float *a, *b;
  DI_CUDA_CHECK(cudaMalloc(&a, 512 * 256 * sizeof(float)));
  DI_CUDA_CHECK(cudaMalloc(&b, 512 * 256 * sizeof(float)));
  DI_CUDA_CHECK(cudaMemset(a, 0, 512 * 256 * sizeof(float)));
  cudaStream_t s;
  DI_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("%d dependent kernels a graph (grids of 1, 16, 64, 512 blocks), us a kernel\n",
              kernels);
  std::printf("| work a thread | plain | PDL wait+release | PDL wait only | saved a kernel |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (const int work : {0, 200, 2000}) {
    const float plain = chain_us<kPlain>(a, b, kernels, work, s);
    const float release = chain_us<kWaitRelease>(a, b, kernels, work, s);
    const float wait = chain_us<kWaitOnly>(a, b, kernels, work, s);
    std::printf("| %d | %.2f | %.2f | %.2f | %.2f (%.0f%%) |\n", work, plain, release, wait,
                plain - release, 100.0f * (plain - release) / plain);
  }
  DI_CUDA_CHECK(cudaStreamDestroy(s));
  DI_CUDA_CHECK(cudaFree(a));
  DI_CUDA_CHECK(cudaFree(b));
  return 0;
}
