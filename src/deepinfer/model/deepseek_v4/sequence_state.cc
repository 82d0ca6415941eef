#include "deepinfer/model/deepseek_v4/sequence_state.h"

#include <cstring>
#include <limits>

namespace deepinfer::v4 {
namespace {

constexpr uint32_t kMagic = 0x34565344;  // "DSV4"

CompressorState make_compressor(int ratio, int dim) {
  CompressorState s;
  s.ratio = ratio;
  s.dim = dim;
  s.width = ratio == 4 ? 2 * dim : dim;
  s.pending_kv.assign(static_cast<size_t>(ratio) * s.width, 0.0f);
  s.pending_gate.assign(static_cast<size_t>(ratio) * s.width,
                        -std::numeric_limits<float>::infinity());
  if (ratio == 4) {
    s.prev_kv.assign(static_cast<size_t>(ratio) * dim, 0.0f);
    s.prev_gate.assign(static_cast<size_t>(ratio) * dim, -std::numeric_limits<float>::infinity());
  }
  return s;
}

class Writer {
 public:
  void u64(uint64_t v) { raw(&v, 8); }
  void floats(const std::vector<float>& v) {
    u64(v.size());
    raw(v.data(), v.size() * 4);
  }
  void raw(const void* p, size_t n) {
    if (n) out.append(static_cast<const char*>(p), n);
  }
  std::string out;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  bool u64(uint64_t* v) { return raw(v, 8); }
  bool floats(std::vector<float>* v, size_t expect = SIZE_MAX) {
    uint64_t n;
    if (!u64(&n) || n > (s_.size() - pos_) / 4 || (expect != SIZE_MAX && n != expect)) return false;
    v->resize(n);
    return raw(v->data(), n * 4);
  }
  bool raw(void* p, size_t n) {
    if (s_.size() - pos_ < n) return false;
    if (n) std::memcpy(p, s_.data() + pos_, n);  // an empty vector's data() may be null
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

void write_comp(Writer& w, const CompressorState& c) {
  w.u64(c.pending);
  w.u64(c.has_prev);
  w.floats(c.pending_kv);
  w.floats(c.pending_gate);
  w.floats(c.prev_kv);
  w.floats(c.prev_gate);
  w.floats(c.entries);
}

bool read_comp(Reader& r, CompressorState* c) {
  uint64_t pending, has_prev;
  if (!r.u64(&pending) || !r.u64(&has_prev) || pending >= static_cast<uint64_t>(c->ratio + 1))
    return false;
  c->pending = static_cast<int>(pending);
  c->has_prev = has_prev != 0;
  return r.floats(&c->pending_kv, c->pending_kv.size()) &&
         r.floats(&c->pending_gate, c->pending_gate.size()) &&
         r.floats(&c->prev_kv, c->prev_kv.size()) && r.floats(&c->prev_gate, c->prev_gate.size()) &&
         r.floats(&c->entries) && (c->dim == 0 || c->entries.size() % c->dim == 0);
}

void write_layer(Writer& w, const LayerState& l) {
  w.floats(l.ring);
  write_comp(w, l.comp);
  write_comp(w, l.index);
}

bool read_layer(Reader& r, LayerState* l) {
  return r.floats(&l->ring, l->ring.size()) && read_comp(r, &l->comp) && read_comp(r, &l->index);
}

// What a compressor holds must agree with the token count: the forward indexes entries by
// position, so a mismatch would read past them.
bool consistent(const CompressorState& c, uint64_t n) {
  if (c.ratio == 0) return c.entries.empty() && c.pending == 0 && !c.has_prev;
  const uint64_t r = static_cast<uint64_t>(c.ratio);
  return static_cast<uint64_t>(c.num_entries()) == n / r &&
         static_cast<uint64_t>(c.pending) == n % r &&
         c.has_prev == (c.width == 2 * c.dim && n >= r);
}

LayerState make_layer(const Config& c, int ratio) {
  LayerState l;
  l.ring.assign(static_cast<size_t>(c.sliding_window) * c.head_dim, 0.0f);
  if (ratio > 0) l.comp = make_compressor(ratio, c.head_dim);
  if (ratio == 4) l.index = make_compressor(ratio, c.index_head_dim);
  return l;
}

}  // namespace

SequenceState make_sequence_state(const Config& c) {
  SequenceState s;
  for (int l = 0; l < c.num_layers; ++l) s.layers.push_back(make_layer(c, c.compress_ratio(l)));
  s.mtp = make_layer(c, 0);
  s.last_hidden.assign(static_cast<size_t>(c.hc_mult) * c.hidden_size, 0.0f);
  return s;
}

std::string SequenceState::serialize() const {
  Writer w;
  w.u64(kMagic);
  w.u64(num_tokens);
  w.u64(static_cast<uint64_t>(last_token));
  w.u64(layers.size());
  for (const auto& l : layers) write_layer(w, l);
  write_layer(w, mtp);
  w.floats(last_hidden);
  return std::move(w.out);
}

StatusOr<SequenceState> SequenceState::deserialize(const std::string& bytes, const Config& c) {
  SequenceState s = make_sequence_state(c);
  Reader r(bytes);
  uint64_t magic, n, last, nl;
  bool ok = r.u64(&magic) && magic == kMagic && r.u64(&n) && r.u64(&last) && r.u64(&nl) &&
            nl == s.layers.size();
  for (size_t i = 0; ok && i < s.layers.size(); ++i) ok = read_layer(r, &s.layers[i]);
  ok = ok && read_layer(r, &s.mtp) && r.floats(&s.last_hidden, s.last_hidden.size()) && r.done();
  ok = ok && n <= (uint64_t{1} << 62) &&
       (n == 0 ? last == ~uint64_t{0} : last < static_cast<uint64_t>(c.vocab_size));
  for (size_t i = 0; ok && i < s.layers.size(); ++i)
    ok = consistent(s.layers[i].comp, n) && consistent(s.layers[i].index, n);
  ok = ok && consistent(s.mtp.comp, 0) && consistent(s.mtp.index, 0);
  if (!ok) return data_loss("sequence state: corrupt or for a different config");
  s.num_tokens = static_cast<int64_t>(n);
  s.last_token = static_cast<int64_t>(last);
  return s;
}

}  // namespace deepinfer::v4
