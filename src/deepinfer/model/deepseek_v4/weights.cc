#include "deepinfer/model/deepseek_v4/weights.h"

#include <cstdio>
#include <cstring>
#include <set>

#include "deepinfer/base/check.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/dequantize.h"

namespace deepinfer::v4 {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_float_dtype(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace

void block_core_tensors(const BlockCoreDims& d, const TensorSink& add) {
  const int64_t H = d.hidden, hd = d.head_dim, nh = d.num_heads;
  const int64_t mix = (2 + d.hc_mult) * d.hc_mult, hcH = d.hc_mult * H;
  constexpr WeightKind kFloat = WeightKind::kFloat, kDense = WeightKind::kDense;
  add("attn_norm.weight", {H}, kFloat);
  add("ffn_norm.weight", {H}, kFloat);
  for (const char* site : {"attn", "ffn"}) {
    add(std::string("hc_") + site + "_fn", {mix, hcH}, kFloat);
    add(std::string("hc_") + site + "_base", {mix}, kFloat);
    add(std::string("hc_") + site + "_scale", {3}, kFloat);
  }
  add("attn.wq_a.weight", {d.q_lora_rank, H}, kDense);
  add("attn.q_norm.weight", {d.q_lora_rank}, kFloat);
  add("attn.wq_b.weight", {nh * hd, d.q_lora_rank}, kDense);
  add("attn.wkv.weight", {hd, H}, kDense);
  add("attn.kv_norm.weight", {hd}, kFloat);
  add("attn.wo_a.weight", {d.o_groups * d.o_lora_rank, nh * hd / d.o_groups}, kDense);
  add("attn.wo_b.weight", {H, d.o_groups * d.o_lora_rank}, kDense);
  add("attn.attn_sink", {nh}, kFloat);
}

void expert_tensors(int64_t H, int64_t inter, int n_routed, int n_shared, const TensorSink& add) {
  for (int e = 0; e < n_routed; ++e) {
    const std::string ep = "ffn.experts." + std::to_string(e) + ".";
    add(ep + "w1.weight", {inter, H}, WeightKind::kExpert);
    add(ep + "w3.weight", {inter, H}, WeightKind::kExpert);
    add(ep + "w2.weight", {H, inter}, WeightKind::kExpert);
  }
  if (n_shared > 0) {
    const int64_t si = inter * n_shared;
    add("ffn.shared_experts.w1.weight", {si, H}, WeightKind::kDense);
    add("ffn.shared_experts.w3.weight", {si, H}, WeightKind::kDense);
    add("ffn.shared_experts.w2.weight", {H, si}, WeightKind::kDense);
  }
}

namespace {

void add_block(std::vector<WeightSpec>& m, const Config& c, const std::string& p, int ratio,
               bool hash, bool mtp) {
  const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_heads;
  const int64_t hcH = c.hc_mult * H, inter = c.moe_intermediate_size;
  auto add = [&](const std::string& n, std::vector<int64_t> s, WeightKind k = WeightKind::kFloat) {
    m.push_back({p + n, std::move(s), k});
  };
  block_core_tensors({H, c.hc_mult, hd, nh, c.q_lora_rank, c.o_groups, c.o_lora_rank}, add);
  if (ratio > 0) {
    int64_t width = ratio == 4 ? 2 * hd : hd;
    add("attn.compressor.wkv.weight", {width, H});
    add("attn.compressor.wgate.weight", {width, H});
    add("attn.compressor.ape", {ratio, width});
    add("attn.compressor.norm.weight", {hd});
  }
  if (ratio == 4) {
    const int64_t ih = c.index_n_heads, ihd = c.index_head_dim;
    add("attn.indexer.wq_b.weight", {ih * ihd, c.q_lora_rank}, WeightKind::kDense);
    add("attn.indexer.weights_proj.weight", {ih, H});
    add("attn.indexer.compressor.wkv.weight", {2 * ihd, H});
    add("attn.indexer.compressor.wgate.weight", {2 * ihd, H});
    add("attn.indexer.compressor.ape", {ratio, 2 * ihd});
    add("attn.indexer.compressor.norm.weight", {ihd});
  }
  add("ffn.gate.weight", {c.n_routed_experts, H});
  if (hash) {
    add("ffn.gate.tid2eid", {c.vocab_size, c.experts_per_token}, WeightKind::kIndex);
  } else {
    add("ffn.gate.bias", {c.n_routed_experts});
  }
  expert_tensors(H, inter, c.n_routed_experts, c.n_shared_experts, add);
  if (mtp) {
    add("e_proj.weight", {H, H}, WeightKind::kDense);
    add("h_proj.weight", {H, H}, WeightKind::kDense);
    add("enorm.weight", {H});
    add("hnorm.weight", {H});
    add("norm.weight", {H});
    add("hc_head_fn", {c.hc_mult, hcH});
    add("hc_head_base", {c.hc_mult});
    add("hc_head_scale", {1});
  }
}

StatusOr<WeightSource> resolve_weight(const Checkpoint& ckpt, const WeightSpec& s) {
  const TensorInfo* t = ckpt.find(s.name);
  if (!t) return not_found("checkpoint " + ckpt.dir() + ": missing tensor '" + s.name + "'");
  WeightSource src{s, t, nullptr, WeightFormat::kFloat};
  auto where = [&] { return "tensor '" + s.name + "' in " + t->file; };
  auto wrong_shape = [&](const std::vector<int64_t>& want) {
    return invalid_argument(where() + ": shape " + shape_str(t->shape) + ", expected " +
                            shape_str(want) + " (" + dtype_name(t->dtype) + ")");
  };
  if (s.kind == WeightKind::kIndex) {
    if (t->dtype != DType::kI64 && t->dtype != DType::kI32)
      return invalid_argument(where() + ": dtype " + dtype_name(t->dtype) + ", expected I64/I32");
    if (t->shape != s.shape) return wrong_shape(s.shape);
    src.format = WeightFormat::kIndex;
    return src;
  }
  if (is_float_dtype(t->dtype)) {
    if (t->shape != s.shape) return wrong_shape(s.shape);
    return src;
  }
  if (s.kind == WeightKind::kFloat ||
      (t->dtype != DType::kF8E4M3 && t->dtype != DType::kI8 && t->dtype != DType::kU8))
    return invalid_argument(where() + ": dtype " + dtype_name(t->dtype) +
                            " is not valid for this tensor");
  const bool named = s.name.size() >= 7 && s.name.compare(s.name.size() - 7, 7, ".weight") == 0;
  src.scale = named ? ckpt.find(s.name.substr(0, s.name.size() - 7) + ".scale") : nullptr;
  if (!src.scale) return not_found(where() + ": quantized weight has no '.scale' tensor");
  if (t->dtype == DType::kF8E4M3) {
    if (t->shape != s.shape) return wrong_shape(s.shape);
    src.format = WeightFormat::kFp8Block;
    return src;
  }
  if (s.kind != WeightKind::kExpert)
    return invalid_argument(where() + ": packed FP4 is only valid for routed experts");
  std::vector<int64_t> packed = {s.shape[0], s.shape[1] / 2};
  if (t->shape != packed) return wrong_shape(packed);
  src.format = WeightFormat::kMxfp4;
  return src;
}

}  // namespace

StatusOr<std::vector<WeightSource>> resolve_weights(const Checkpoint& ckpt, const Config& c) {
  std::vector<WeightSource> out;
  std::set<std::string> used;
  for (const WeightSpec& s : weight_manifest(c)) {
    ASSIGN_OR_RETURN(WeightSource src, resolve_weight(ckpt, s));
    used.insert(s.name);
    if (src.scale) used.insert(s.name.substr(0, s.name.size() - 7) + ".scale");
    out.push_back(std::move(src));
  }
  for (const std::string& n : ckpt.canonical_names()) {
    if (!used.count(n)) {
      const TensorInfo* t = ckpt.find(n);
      return invalid_argument("checkpoint " + ckpt.dir() + ": unexpected tensor '" + n + "' in " +
                              t->file + " (not part of this deepseek_v4 config)");
    }
  }
  return out;
}

Status load_index(const WeightSource& src, const Config& c, std::vector<int32_t>* out) {
  const TensorInfo* t = src.tensor;
  const int64_t numel = t->numel();
  out->resize(numel);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t x;
    if (t->dtype == DType::kI64) {
      std::memcpy(&x, t->data + 8 * k, 8);
    } else {
      int32_t y;
      std::memcpy(&y, t->data + 4 * k, 4);
      x = y;
    }
    if (x < 0 || x >= c.n_routed_experts)
      return invalid_argument("tensor '" + src.spec.name + "' in " + t->file + ": expert id " +
                              std::to_string(x) + " at element " + std::to_string(k) +
                              " is out of range");
    (*out)[k] = static_cast<int32_t>(x);
  }
  return ok_status();
}

Status load_float(const WeightSource& src, const Config& c, float* out) {
  switch (src.format) {
    case WeightFormat::kFloat:
      return to_float(*src.tensor, out);
    case WeightFormat::kFp8Block:
      return dequantize_fp8_block(*src.tensor, *src.scale, c.weight_block_rows, c.weight_block_cols,
                                  out);
    case WeightFormat::kMxfp4:
      return dequantize_mxfp4(*src.tensor, *src.scale, out);
    case WeightFormat::kIndex:
      break;
  }
  return invalid_argument("tensor '" + src.spec.name + "' is an index table, not floats");
}

int64_t WeightSource::stored_bytes() const {
  return static_cast<int64_t>(tensor->nbytes + (scale ? scale->nbytes : 0));
}

int64_t WeightSource::numel() const {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return n;
}

std::vector<WeightSpec> weight_manifest(const Config& c) {
  std::vector<WeightSpec> m;
  const int64_t H = c.hidden_size, hcH = c.hc_mult * H;
  m.push_back({"embed.weight", {c.vocab_size, H}, WeightKind::kFloat});
  m.push_back({"head.weight", {c.vocab_size, H}, WeightKind::kFloat});
  m.push_back({"norm.weight", {H}, WeightKind::kFloat});
  m.push_back({"hc_head_fn", {c.hc_mult, hcH}, WeightKind::kFloat});
  m.push_back({"hc_head_base", {c.hc_mult}, WeightKind::kFloat});
  m.push_back({"hc_head_scale", {1}, WeightKind::kFloat});
  for (int l = 0; l < c.num_layers; ++l)
    add_block(m, c, "layers." + std::to_string(l) + ".", c.compress_ratio(l), c.is_hash_layer(l),
              false);
  for (int k = 0; k < c.num_mtp_layers; ++k)
    add_block(m, c, "mtp." + std::to_string(k) + ".", 0, false, true);
  return m;
}

int64_t Weights::bytes() const {
  int64_t n = 0;
  for (const auto& [name, v] : f32_) n += static_cast<int64_t>(v.size()) * 4;
  for (const auto& [name, v] : i32_) n += static_cast<int64_t>(v.size()) * 4;
  return n;
}

const float* Weights::f(const std::string& name) const {
  auto it = f32_.find(name);
  if (it == f32_.end()) std::fprintf(stderr, "missing weight %s\n", name.c_str());
  DI_CHECK(it != f32_.end());
  return it->second.data();
}

const int32_t* Weights::i(const std::string& name) const {
  auto it = i32_.find(name);
  DI_CHECK(it != i32_.end());
  return it->second.data();
}

bool drop_absent_mtp(const Checkpoint& ckpt, Config* c) {
  if (c->num_mtp_layers == 0) return false;
  for (const std::string& name : ckpt.canonical_names())
    if (name.rfind("mtp.", 0) == 0) return false;
  std::fprintf(stderr,
               "deepinfer: %s has no MTP weights (mtp.*) although config.json counts %d MTP "
               "layer(s): loading with MTP off\n",
               ckpt.dir().c_str(), c->num_mtp_layers);
  c->compress_ratios.resize(static_cast<size_t>(c->num_layers));
  c->num_mtp_layers = 0;
  return true;
}

StatusOr<Weights> load_weights(const Checkpoint& ckpt, const Config& c,
                               const std::function<void(const LoadProgress&)>& progress,
                               const std::function<bool(const std::string&)>& keep) {
  ASSIGN_OR_RETURN(std::vector<WeightSource> sources, resolve_weights(ckpt, c));
  if (keep) std::erase_if(sources, [&](const WeightSource& s) { return !keep(s.spec.name); });
  LoadProgress p;
  p.tensors_total = static_cast<int64_t>(sources.size());
  for (const auto& s : sources) p.bytes_total += static_cast<int64_t>(s.tensor->nbytes);
  Weights w;
  for (const auto& s : sources) {
    if (s.format == WeightFormat::kIndex) {
      RETURN_IF_ERROR(load_index(s, c, &w.i32()[s.spec.name]));
    } else {
      std::vector<float> out(s.numel());
      RETURN_IF_ERROR(load_float(s, c, out.data()));
      w.f32()[s.spec.name] = std::move(out);
    }
    ++p.tensors_done;
    p.bytes_done += static_cast<int64_t>(s.tensor->nbytes);
    if (progress) progress(p);
  }
  return w;
}

}  // namespace deepinfer::v4
