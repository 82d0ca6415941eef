// Engram at run time (spec §11.2.7, ENGRAM.md): the token map and hasher a model builds once from
// its tokenizer, and the gated n-gram lookup an Engram layer adds to its HC streams before the
// block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41/engram_hash.h"
#include "deepinfer/model/deepseek_v41/model_context.h"

namespace deepinfer::v41 {

struct EngramTables {
  std::vector<int64_t> token_map;  // token id -> compressed id
  EngramHasher hasher;
};

// From `<model_dir>/tokenizer.json`: the compressed vocabulary must have
// engram_compressed_vocab_size entries. Errors name the file or the config field.
StatusOr<EngramTables> load_engram_tables(const Config& c, const std::string& model_dir);

// X holds n tokens x hc_mult streams x hidden; rows holds, per token, the hasher's rows of every
// Engram layer ([n][n_layers][n_cols]). Adds gate_j * value to stream j of the Engram layer
// `layer`.
void engram_forward(const ModelContext& m, int layer, const EngramHasher& hasher,
                    const int64_t* rows, int64_t n, float* X);

}  // namespace deepinfer::v41
