// Small glue kernels between the ops of the GPU forward: embedding gather, the sliding-window
// ring, the compressors' window bookkeeping and entry stores into pages, the selection lists HCA
// attends, and the layout changes around the grouped output projection. Everything stays on the
// device.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/entry_pages.h"

namespace deepinfer::cuda {

// X[t, j, :] = embed[ids[t], :] for each of the hc streams j.
void embed_rows(const float* embed, const int32_t* ids, int64_t n, int hc, int64_t hidden, float* X,
                cudaStream_t stream);

// X[t, j, :] += e[t, :] for each of the hc streams j (the MTP layer's input, spec §7).
void add_to_streams(float* X, const float* e, int64_t n, int hc, int64_t hidden,
                    cudaStream_t stream);

// out[i] = start + i * step.
void fill_positions(int64_t* out, int64_t n, int64_t start, int64_t step, cudaStream_t stream);

// Position pos0 + t goes to ring row (pos0 + t) % ring_rows; of a segment longer than the ring
// only its last ring_rows positions are written (after its attention read the older ones).
void ring_write(const float* kv, int64_t n, int64_t pos0, int dim, float* ring, int64_t ring_rows,
                cudaStream_t stream);

// Entries e0 .. e0 + n - 1 of one sequence (row 0 of dst's tables) from src [n, dst.dim].
void store_entries(const float* src, int64_t n, int64_t e0, const EntryPages& dst,
                   cudaStream_t stream);

// p[0 .. n) = value.
void fill_floats(float* p, int64_t n, float value, cudaStream_t stream);

// One compressor over a chunk of n tokens at pos0.. (kv, gate: [n, width] projections, ape:
// [ratio, width]). The state (as sequence_state.h) is the unfinished window's rows (gate with
// ape added) and, for CSA (width == 2 * dim), the A-halves of the last finished window.
struct CompressorChunk {
  const float* kv = nullptr;
  const float* gate = nullptr;
  const float* ape = nullptr;
  float* pending_kv = nullptr;    // [ratio, width]
  float* pending_gate = nullptr;  // [ratio, width]
  float* prev_kv = nullptr;       // [ratio, dim], CSA only
  float* prev_gate = nullptr;     // [ratio, dim], CSA only
  int64_t pos0 = 0, n = 0;
  int ratio = 0, width = 0, dim = 0;

  // Host and device: the kernels and their launchers agree on the geometry.
  __host__ __device__ bool overlap() const { return width == 2 * dim; }
  __host__ __device__ int slots() const { return overlap() ? 2 * ratio : ratio; }
  __host__ __device__ int64_t first_entry() const { return pos0 / ratio; }
  __host__ __device__ int64_t windows() const { return (pos0 + n) / ratio - pos0 / ratio; }
};

// The slots of every window the chunk completes, as compressor_pool takes them:
// win_kv/win_gate [windows, slots, dim]. CSA: the previous window's A-halves (gate -inf before
// the first window), then the window's own B-halves. Reads the state, does not change it.
void compressor_windows(const CompressorChunk& c, float* win_kv, float* win_gate,
                        cudaStream_t stream);

// Moves the state past the chunk: prev from the last completed window, then the new unfinished
// window (unused slots reset to kv 0, gate -inf as on the CPU).
void compressor_advance(const CompressorChunk& c, cudaStream_t stream);

// HCA: query t attends every visible entry 0 .. (pos0 + t + 1) / ratio - 1.
void select_all_visible(int64_t n, int64_t pos0, int ratio, int max_selected, int32_t* selected,
                        int32_t* num_selected, cudaStream_t stream);

// o [n, groups, gin] fp32 -> og [groups, n, gin] bf16, so each group is one contiguous GEMM input.
void split_groups_bf16(const float* o, int64_t n, int groups, int64_t gin, __nv_bfloat16* og,
                       cudaStream_t stream);
// zg [groups, n, width] fp32 -> z [n, groups, width] bf16 (the next GEMM's input).
void merge_groups_bf16(const float* zg, int64_t n, int groups, int64_t width, __nv_bfloat16* z,
                       cudaStream_t stream);

}  // namespace deepinfer::cuda
