// Engram at run time (spec §11.2.7, ENGRAM.md): the token map and hasher a model builds once from
// its tokenizer, and the gated n-gram lookup an Engram layer adds to its HC streams before the
// block.
#pragma once

#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v41/engram_hash.h"
#include "deepinfer/model/deepseek_v41/engram_rows.h"
#include "deepinfer/model/deepseek_v41/model_context.h"

namespace deepinfer::v41 {

struct EngramTables {
  std::vector<int64_t> token_map;  // token id -> compressed id
  EngramHasher hasher;
  // Per Engram slot (layer_ids order): its table read in place from the mapped checkpoint, which
  // must outlive these (the tables are ~100 GB each in the real model: never expanded).
  std::vector<EngramRows> tables;
};

// From `<model_dir>/tokenizer.json` (the compressed vocabulary must have
// engram_compressed_vocab_size entries) and ckpt's `layers.{l}.engram.embed` tables. Errors
// name the file, the tensor or the config field.
StatusOr<EngramTables> load_engram_tables(const Config& c, const std::string& model_dir,
                                          const Checkpoint& ckpt);

// The table rows every Engram layer of one forward call reads, gathered on a helper thread as
// soon as the call's ids are hashed (spec §11.2.7: the tables live in host memory), so the
// gather overlaps the layers before the first Engram layer. rows: the hasher's rows of every
// Engram layer per token ([n][n_layers][n_cols]). Joins the helper when destroyed.
class EngramPrefetch {
 public:
  EngramPrefetch(const EngramTables& tables, std::vector<int64_t> rows, int64_t n);
  EngramPrefetch(const EngramPrefetch&) = delete;
  EngramPrefetch& operator=(const EngramPrefetch&) = delete;
  ~EngramPrefetch();
  // Engram slot `slot`'s rows, [n][n_cols * head_dim] floats; waits for the gather.
  const float* rows_of(int slot);

 private:
  std::vector<int64_t> rows_;
  std::vector<std::vector<float>> emb_;  // per slot
  std::future<void> gathered_;
};

// X holds n tokens x hc_mult streams x hidden; emb the layer's gathered table rows
// (EngramPrefetch::rows_of). Adds gate_j * value to stream j of the Engram layer `layer`.
void engram_forward(const ModelContext& m, int layer, const EngramHasher& hasher, const float* emb,
                    int64_t n, float* X);

}  // namespace deepinfer::v41
