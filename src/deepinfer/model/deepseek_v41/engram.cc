#include "deepinfer/model/deepseek_v41/engram.h"

#include <cmath>
#include <filesystem>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/model/deepseek_v41/engram_token_map.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::v41 {

StatusOr<EngramTables> load_engram_tables(const Config& c, const std::string& model_dir,
                                          const Checkpoint& ckpt) {
  const std::string path = model_dir + "/tokenizer.json";
  if (!std::filesystem::exists(path))
    return not_found(path + ": the Engram layers need the model's tokenizer (text_config." +
                     "engram_layer_ids is not empty)");
  ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tok,
                   tokenizer::Tokenizer::from_file(path));
  ASSIGN_OR_RETURN(EngramTokenMap map, build_engram_token_map(*tok));
  if (map.compressed_vocab_size != c.engram.compressed_vocab_size)
    return invalid_argument(path + " gives " + std::to_string(map.compressed_vocab_size) +
                            " compressed Engram ids, text_config.engram_compressed_vocab_size is " +
                            std::to_string(c.engram.compressed_vocab_size));
  if (c.engram.pad_id < 0 || c.engram.pad_id >= static_cast<int64_t>(map.compressed.size()))
    return invalid_argument("text_config.engram_pad_id " + std::to_string(c.engram.pad_id) +
                            " is not a token of " + path);
  EngramHashParams params;
  params.layer_ids.assign(c.engram.layer_ids.begin(), c.engram.layer_ids.end());
  params.max_ngram_size = c.engram.max_ngram_size;
  params.n_heads = c.engram.n_heads;
  params.vocab_size = c.engram.vocab_size;
  params.compressed_vocab_size = c.engram.compressed_vocab_size;
  params.pad_id = map.compressed[c.engram.pad_id];
  // The checkpoint's vocabulary is padded past the tokenizer's ids (129280 against the real
  // tokenizer's 128815): those ids take the pad's compressed id, so a model that samples one
  // can be fed it back (docs/decisions/0016-engram-ids-past-the-tokenizer.md).
  if (static_cast<int64_t>(map.compressed.size()) < c.vocab_size)
    map.compressed.resize(static_cast<size_t>(c.vocab_size), params.pad_id);
  params.num_embeddings = c.engram.num_embeddings;
  ASSIGN_OR_RETURN(EngramHasher hasher, EngramHasher::create(params));
  std::vector<EngramRows> tables;
  for (int l : c.engram.layer_ids) {
    ASSIGN_OR_RETURN(EngramRows t, EngramRows::open(ckpt, layer_prefix(l) + "engram.embed.weight"));
    if (t.dim() != c.engram.head_dim)
      return invalid_argument("Engram table of layer " + std::to_string(l) + " has rows of " +
                              std::to_string(t.dim()) + " values, text_config.engram_head_dim is " +
                              std::to_string(c.engram.head_dim));
    tables.push_back(std::move(t));
  }
  return EngramTables{std::move(map.compressed), std::move(hasher), std::move(tables)};
}

EngramPrefetch::EngramPrefetch(const EngramTables& tables, std::vector<int64_t> rows, int64_t n)
    : rows_(std::move(rows)), emb_(tables.tables.size()) {
  const int slots = static_cast<int>(tables.tables.size()), cols = tables.hasher.n_cols();
  const int layers = tables.hasher.n_layers();
  gathered_ = std::async(std::launch::async, [this, &tables, n, slots, cols, layers] {
    for (int s = 0; s < slots; ++s) {
      const EngramRows& table = tables.tables[s];
      const int64_t in = cols * table.dim();
      emb_[s].resize(n * in);
      // A token's `cols` rows of this slot sit together in rows_, and land together in emb.
      for (int64_t t = 0; t < n; ++t)
        table.gather(&rows_[(t * layers + s) * cols], cols, &emb_[s][t * in]);
    }
  });
}

EngramPrefetch::~EngramPrefetch() {
  if (gathered_.valid()) gathered_.wait();
}

const float* EngramPrefetch::rows_of(int slot) {
  if (gathered_.valid()) gathered_.get();
  return emb_[slot].data();
}

void engram_forward(const ModelContext& m, int layer, const EngramHasher& hasher, const float* emb,
                    int64_t n, float* X) {
  const Config& c = m.c;
  const std::string p = layer_prefix(layer) + "engram.";
  const int cols = hasher.n_cols(), hc = c.hc_mult;
  const int64_t H = c.hidden_size, hdim = c.engram.head_dim, in = cols * hdim;
  const int64_t out = (hc + 1) * H;
  std::vector<float> kv(n * out);
  cpu::linear(m.f(p + "wkv.weight"), out, in, emb, n, kv.data());
  const float* qw = m.f(p + "q_weight");
  const float* kw = m.f(p + "k_weight");
  const float eps = m.eps(), inv_sqrt_h = static_cast<float>(std::pow(double(H), -0.5));
  auto mean_sq = [H](const float* x) {
    double s = 0;
    for (int64_t d = 0; d < H; ++d) s += double(x[d]) * x[d];
    return static_cast<float>(s / H);
  };
  for (int64_t t = 0; t < n; ++t) {
    const float* value = &kv[t * out + hc * H];
    for (int j = 0; j < hc; ++j) {
      float* x = &X[(t * hc + j) * H];
      const float* key = &kv[t * out + j * H];
      double dot = 0;
      for (int64_t d = 0; d < H; ++d)
        dot += double(x[d] * (qw[j * H + d] * kw[j * H + d])) * key[d];
      const float rstd =
          (1.0f / std::sqrt(mean_sq(x) + eps)) * (1.0f / std::sqrt(mean_sq(key) + eps));
      const float s = static_cast<float>(dot) * rstd * inv_sqrt_h;
      // Signed square root before the sigmoid, as in training.
      const float gate = cpu::sigmoid(std::copysign(std::sqrt(std::max(std::fabs(s), 1e-6f)), s));
      for (int64_t d = 0; d < H; ++d) x[d] += gate * value[d];
    }
  }
}

}  // namespace deepinfer::v41
