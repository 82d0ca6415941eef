// deepinfer bench --device cuda: the GPU forward (runtime/cuda/forward CudaModel) timed directly,
// without the CPU engine around it: prefill of one prompt, decode steps at several batch sizes
// with a given context per sequence, optionally one long-context decode; each next to its
// roofline floor (roofline.h), and optionally transformers' DeepseekV4ForCausalLM on the same
// GPU and model, run by bench/transformers_reference_bench.py after our model is freed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct CudaBenchOptions {
  std::string mode;  // latency or throughput: only which batch sizes are the default
  std::string model_dir;
  std::vector<int> batches;
  int64_t context = 4096;
  int64_t prefill_len = 4096;
  int steps = 16;  // timed decode steps per batch size (after warm-up)
  int warmup = 2;  // untimed decode steps first
  int64_t long_context = 0;
  // Prefill runs in chunks of this many tokens (the CUDA runner's largest chunk: every chunk
  // reads every touched expert's weights once, so the chunk bounds prefill's weight traffic).
  // 0: the engine's default step budget on cuda (default_batched_tokens), so the forward alone
  // chunks a prompt as `serve` does (decision 0019).
  int64_t prefill_chunk = 0;
  bool cuda_graphs = true;       // decode steps replayed from CUDA graphs (off: launched eagerly)
  bool batch_invariant = false;  // --batch-invariant / DEEPINFER_BATCH_INVARIANT: its kernels
  bool phase_times = false;      // per row, extra untimed runs with GPU time per forward phase
  std::string reference;         // "transformers" to run the reference, empty for none
  std::string reference_script;
  std::string reference_args;  // appended to the reference command line as given
  std::string python = "python3";
  std::string json_path;
  uint64_t seed = 42;
};

// Prints the table, writes the JSON; returns the process exit code.
int run_cuda_bench(const CudaBenchOptions& o);

}  // namespace deepinfer::cli
