#include "deepinfer/model/deepseek_v41/weights.h"

#include <set>
#include <utility>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/dequantize.h"

namespace deepinfer::v41 {
namespace {

bool is_float_dtype(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }
bool is_scale_dtype(DType d) {
  return d == DType::kF8E8M0 || d == DType::kF32 || d == DType::kBF16;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string scale_name(const std::string& weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight_name.size() < kSuffix.size() ||
      weight_name.compare(weight_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return std::string();
  return weight_name.substr(0, weight_name.size() - kSuffix.size()) + ".scale";
}

void add_layer(std::vector<WeightSpec>& m, const Config& c, int l) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const LayerRoles& r = c.layers[l];
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads;
  const int64_t inter = c.moe_intermediate_size;
  auto add = [&](const std::string& n, std::vector<int64_t> s, WeightKind k = WeightKind::kFloat) {
    m.push_back({p + n, std::move(s), k});
  };
  // The shared pieces name only float, dense and expert storage, which V4.1 allows alike.
  const v4::TensorSink add_shared = [&](const std::string& n, std::vector<int64_t> s,
                                        v4::WeightKind k) {
    add(n, std::move(s),
        k == v4::WeightKind::kExpert  ? WeightKind::kExpert
        : k == v4::WeightKind::kDense ? WeightKind::kDense
                                      : WeightKind::kFloat);
  };
  v4::block_core_tensors({H, c.hc_mult, hd, nh, c.q_lora_rank, c.o_groups, c.o_lora_rank},
                         add_shared);
  const int64_t ih = c.index_n_heads, ihd = c.index_head_dim;
  if (r.kv == KvRole::kSource) {
    // The latent compressor: ratio 1 is a plain per-token latent (no pooling gate), no ape.
    add("attn.compressor.wkv.weight", {hd, H}, WeightKind::kDense);
    if (r.compress_ratio > 1) add("attn.compressor.wgate.weight", {hd, H}, WeightKind::kDense);
    add("attn.compressor.norm.weight", {hd});
    // Indexer keys come from the pre-RoPE latent, so only KV sources own wk / k_norm.
    add("attn.indexer.wk.weight", {ihd, hd}, WeightKind::kDense);
    add("attn.indexer.k_norm.weight", {ihd});
  }
  if (r.index == IndexRole::kSource || r.index == IndexRole::kReindex) {
    add("attn.indexer.wq_b.weight", {ih * ihd, c.q_lora_rank}, WeightKind::kDense);
    add("attn.indexer.weights_proj.weight", {ih, H}, WeightKind::kDense);
  }
  add("ffn.gate.weight", {c.n_routed_experts, H});
  add("ffn.gate.bias", {c.n_routed_experts});
  add("ffn.gate.bias_vl", {c.n_routed_experts});
  v4::expert_tensors(H, inter, c.n_routed_experts, c.n_shared_experts, add_shared);
  if (r.engram_slot >= 0) {
    const EngramConfig& g = c.engram;
    const int64_t rows = g.num_embeddings[r.engram_slot];
    // embed.scale is listed under the table (kEngramTable) and checked there.
    add("engram.embed.weight", {rows, g.head_dim}, WeightKind::kEngramTable);
    add("engram.wkv.weight",
        {(int64_t(c.hc_mult) + 1) * H, int64_t(g.max_ngram_size - 1) * g.n_heads * g.head_dim},
        WeightKind::kDense);
    add("engram.q_weight", {c.hc_mult, H});
    add("engram.k_weight", {c.hc_mult, H});
  }
}

class Resolver {
 public:
  Resolver(const Checkpoint& ckpt, const Config& c) : ckpt_(ckpt), c_(c) {}

  StatusOr<WeightSource> resolve(const WeightSpec& s) const {
    const TensorInfo* t = ckpt_.find(s.name);
    if (!t) return not_found("checkpoint " + ckpt_.dir() + ": missing tensor '" + s.name + "'");
    WeightSource src{s, t, nullptr, WeightFormat::kFloat};
    if (s.kind == WeightKind::kEngramTable) return resolve_engram(std::move(src));
    if (is_float_dtype(t->dtype)) {
      if (t->shape != s.shape) return wrong_shape(*t, s.shape);
      return src;
    }
    if (s.kind == WeightKind::kFloat ||
        (t->dtype != DType::kF8E4M3 && t->dtype != DType::kI8 && t->dtype != DType::kU8))
      return invalid_argument(where(*t) + ": dtype " + dtype_name(t->dtype) +
                              " is not valid for this tensor");
    const std::string sn = scale_name(s.name);
    src.scale = sn.empty() ? nullptr : ckpt_.find(sn);
    if (!src.scale) return not_found(where(*t) + ": quantized weight has no '.scale' tensor");
    if (t->dtype == DType::kF8E4M3) {
      if (t->shape != s.shape) return wrong_shape(*t, s.shape);
      // Released dense blocks are 32x32 (config); wo_a may use 128x128: go by the scale shape.
      const std::pair<int, int> blocks[] = {{c_.weight_block_rows, c_.weight_block_cols},
                                            {128, 128}};
      for (auto [br, bc] : blocks) {
        if (src.scale->shape ==
            std::vector<int64_t>{ceil_div(s.shape[0], br), ceil_div(s.shape[1], bc)}) {
          src.format = WeightFormat::kFp8Block;
          src.block_rows = br;
          src.block_cols = bc;
          RETURN_IF_ERROR(check_fp8_block(*t, *src.scale, br, bc));
          return src;
        }
      }
      return invalid_argument(
          where(*src.scale) + ": scale shape " + shape_to_string(src.scale->shape) +
          " matches neither " + std::to_string(c_.weight_block_rows) + "x" +
          std::to_string(c_.weight_block_cols) + " nor 128x128 blocks of weight '" + t->name +
          "' " + shape_to_string(t->shape));
    }
    if (s.kind != WeightKind::kExpert)
      return invalid_argument(where(*t) + ": packed FP4 is only valid for routed experts");
    const std::vector<int64_t> packed = {s.shape[0], s.shape[1] / 2};
    if (t->shape != packed) return wrong_shape(*t, packed);
    src.format = WeightFormat::kMxfp4;
    RETURN_IF_ERROR(check_mxfp4(*t, *src.scale));
    return src;
  }

 private:
  static std::string where(const TensorInfo& t) { return "tensor '" + t.name + "' in " + t.file; }
  static Status wrong_shape(const TensorInfo& t, const std::vector<int64_t>& want) {
    return invalid_argument(where(t) + ": shape " + shape_to_string(t.shape) + ", expected " +
                            shape_to_string(want) + " (" + dtype_name(t.dtype) + ")");
  }

  // The Engram table: float, or F8_E4M3 with E8M0 scales per row ([rows, 1]) or per 32 channels
  // ([rows, ceil(head_dim / 32)]). engram.embed.scale exists either way (save_pretrained writes
  // it; the fixtures' are all ones).
  StatusOr<WeightSource> resolve_engram(WeightSource src) const {
    const TensorInfo* t = src.tensor;
    const WeightSpec& s = src.spec;
    const std::string sn = scale_name(s.name);
    src.scale = ckpt_.find(sn);
    if (!src.scale)
      return not_found("checkpoint " + ckpt_.dir() + ": missing tensor '" + sn +
                       "' (the scale of Engram table '" + t->name + "' in " + t->file + ")");
    const TensorInfo& sc = *src.scale;
    if (!is_scale_dtype(sc.dtype))
      return invalid_argument(where(sc) + ": dtype " + dtype_name(sc.dtype) +
                              ", expected F8_E8M0, F32 or BF16");
    const int64_t rows = s.shape[0], dim = s.shape[1];
    const std::vector<int64_t> per_row = {rows, 1}, per_32 = {rows, ceil_div(dim, 32)};
    if (sc.shape != per_row && sc.shape != per_32)
      return invalid_argument(where(sc) + ": shape " + shape_to_string(sc.shape) + ", expected " +
                              shape_to_string(per_row) +
                              (per_32 != per_row ? " or " + shape_to_string(per_32) : ""));
    if (t->shape != s.shape) return wrong_shape(*t, s.shape);
    if (is_float_dtype(t->dtype)) return src;
    if (t->dtype != DType::kF8E4M3)
      return invalid_argument(where(*t) + ": dtype " + dtype_name(t->dtype) +
                              ", expected F32/BF16/F16 or F8_E4M3");
    src.format = WeightFormat::kFp8Block;
    src.block_rows = 1;
    src.block_cols = sc.shape == per_32 ? 32 : static_cast<int>(dim);
    RETURN_IF_ERROR(check_fp8_block(*t, sc, src.block_rows, src.block_cols));
    return src;
  }

  const Checkpoint& ckpt_;
  const Config& c_;
};

}  // namespace

std::vector<WeightSpec> weight_manifest(const Config& c, bool with_draft) {
  std::vector<WeightSpec> m;
  const int64_t H = c.hidden_size;
  m.push_back({"embed.weight", {c.vocab_size, H}, WeightKind::kFloat});
  if (!c.tie_word_embeddings) m.push_back({"head.weight", {c.vocab_size, H}, WeightKind::kFloat});
  m.push_back({"norm.weight", {H}, WeightKind::kFloat});
  for (int l = 0; l < c.num_layers; ++l) add_layer(m, c, l);
  if (with_draft)
    for (WeightSpec& s : dspark_weight_manifest(c)) m.push_back(std::move(s));
  return m;
}

std::vector<WeightSpec> dspark_weight_manifest(const Config& c) {
  std::vector<WeightSpec> m;
  const int64_t H = c.hidden_size, V = c.vocab_size, R = c.dspark.markov_rank;
  const int64_t taps = static_cast<int64_t>(c.dspark.target_layer_ids.size());
  for (int s = 0; s < c.num_nextn_layers; ++s) {
    const std::string p = "mtp." + std::to_string(s) + ".";
    auto add = [&](const std::string& n, std::vector<int64_t> shape,
                   WeightKind k = WeightKind::kFloat) {
      m.push_back({p + n, std::move(shape), k});
    };
    const v4::TensorSink add_shared = [&](const std::string& n, std::vector<int64_t> shape,
                                          v4::WeightKind k) {
      add(n, std::move(shape),
          k == v4::WeightKind::kExpert  ? WeightKind::kExpert
          : k == v4::WeightKind::kDense ? WeightKind::kDense
                                        : WeightKind::kFloat);
    };
    // A stage is a sliding-only V4.1 block (compress_ratios entry 0) with its own expert count.
    v4::block_core_tensors(
        {H, c.hc_mult, c.head_dim, c.num_heads, c.q_lora_rank, c.o_groups, c.o_lora_rank},
        add_shared);
    add("ffn.gate.weight", {c.dspark.n_routed_experts, H});
    add("ffn.gate.bias", {c.dspark.n_routed_experts});
    v4::expert_tensors(H, c.moe_intermediate_size, c.dspark.n_routed_experts, c.n_shared_experts,
                       add_shared);
    if (s == 0) {
      add("main_proj.weight", {H, taps * H}, WeightKind::kDense);
      add("main_norm.weight", {H});
    }
    if (s + 1 == c.num_nextn_layers) {
      add("norm.weight", {H});
      add("markov_head.embed.weight", {V, R});
      add("markov_head.head.weight", {V, R}, WeightKind::kDense);
      add("confidence_head.proj.weight", {1, H + R});
    }
  }
  return m;
}

bool has_draft_weights(const Checkpoint& ckpt) {
  for (const std::string& n : ckpt.canonical_names())
    if (n.rfind("mtp.", 0) == 0) return true;
  return false;
}

std::string no_draft_tensors_reason(const Config& c) {
  return "deepseek_v41 DSpark drafter: the checkpoint holds no draft tensors (mtp.*), although "
         "config.json counts " +
         std::to_string(c.num_nextn_layers) + " draft layer(s)";
}

int64_t WeightSource::numel() const {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return n;
}

int64_t WeightSource::stored_bytes() const {
  return static_cast<int64_t>(tensor->nbytes + (scale ? scale->nbytes : 0));
}

StatusOr<std::vector<WeightSource>> resolve_weights(const Checkpoint& ckpt, const Config& c) {
  if (static_cast<int>(c.layers.size()) != c.num_layers)
    return invalid_argument("deepseek_v41 config has no layer roles (finalize_config not run)");
  Resolver resolver(ckpt, c);
  std::vector<WeightSource> out;
  std::set<std::string> used;
  const bool with_draft = c.num_nextn_layers > 0 && has_draft_weights(ckpt);
  for (const WeightSpec& s : weight_manifest(c, with_draft)) {
    ASSIGN_OR_RETURN(WeightSource src, resolver.resolve(s));
    used.insert(s.name);
    if (src.scale) used.insert(scale_name(s.name));
    out.push_back(std::move(src));
  }
  for (const std::string& n : ckpt.canonical_names()) {
    if (used.count(n)) continue;
    const TensorInfo* t = ckpt.find(n);
    return invalid_argument("checkpoint " + ckpt.dir() + ": unexpected tensor '" + t->name +
                            "' in " + t->file + " (not part of this deepseek_v41 config)");
  }
  return out;
}

Status load_float(const WeightSource& src, float* out) {
  switch (src.format) {
    case WeightFormat::kFloat:
      return to_float(*src.tensor, out);
    case WeightFormat::kFp8Block:
      return dequantize_fp8_block(*src.tensor, *src.scale, src.block_rows, src.block_cols, out);
    case WeightFormat::kMxfp4:
      return dequantize_mxfp4(*src.tensor, *src.scale, out);
  }
  return invalid_argument("tensor '" + src.spec.name + "': unknown format");
}

StatusOr<v4::Weights> load_weights(const Checkpoint& ckpt, const Config& c,
                                   const std::function<void(const v4::LoadProgress&)>& progress,
                                   const std::function<bool(const std::string&)>& keep) {
  ASSIGN_OR_RETURN(std::vector<WeightSource> sources, resolve_weights(ckpt, c));
  if (keep) std::erase_if(sources, [&](const WeightSource& s) { return !keep(s.spec.name); });
  v4::LoadProgress p;
  p.tensors_total = static_cast<int64_t>(sources.size());
  for (const auto& s : sources) p.bytes_total += s.stored_bytes();
  v4::Weights w;
  for (const auto& s : sources) {
    // Engram tables stay in the mapped checkpoint (EngramRows), validated above, never expanded.
    if (s.spec.kind != WeightKind::kEngramTable) {
      std::vector<float> out(s.numel());
      RETURN_IF_ERROR(load_float(s, out.data()));
      w.f32()[s.spec.name] = std::move(out);
    }
    ++p.tensors_done;
    p.bytes_done += s.stored_bytes();
    if (progress) progress(p);
  }
  if (c.tie_word_embeddings) w.f32()["head.weight"] = w.f32().at("embed.weight");
  return w;
}

}  // namespace deepinfer::v41
