#include "deepinfer/model/deepseek_v4/sequence_state.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "deepinfer/base/check.h"

namespace deepinfer::v4 {
namespace {

constexpr uint32_t kMagic = 0x34565344;  // "DSV4"

// init: fill the rows with `fill` (a fresh state); otherwise keep what the pages hold.
std::vector<float*> bind_rows(const StateLayout& lay, StatePages& pages, const RowBuffer& b,
                              float fill, bool init) {
  std::vector<float*> rows(b.rows);
  for (int i = 0; i < b.rows; ++i) {
    const RowPlace& at = lay.constant_rows()[b.first + i];
    rows[i] = pages.constant_page(at.page) + at.offset;
    if (init) std::fill(rows[i], rows[i] + b.width, fill);
  }
  return rows;
}

CompressorState bind_compressor(const StateLayout& lay, StatePages& pages,
                                const CompressorLayout& cl, bool init) {
  CompressorState s;
  if (cl.ratio == 0) return s;
  const float ninf = -std::numeric_limits<float>::infinity();
  s.ratio = cl.ratio;
  s.dim = cl.dim;
  s.width = cl.width;
  s.pending_kv = bind_rows(lay, pages, cl.pending_kv, 0.0f, init);
  s.pending_gate = bind_rows(lay, pages, cl.pending_gate, ninf, init);
  s.prev_kv = bind_rows(lay, pages, cl.prev_kv, 0.0f, init);
  s.prev_gate = bind_rows(lay, pages, cl.prev_gate, ninf, init);
  s.pages = &pages;
  s.layout = &lay;
  s.place = &cl;
  return s;
}

LayerState bind_layer(const StateLayout& lay, StatePages& pages, const LayerLayout& ll, bool init) {
  LayerState l;
  l.ring = bind_rows(lay, pages, ll.ring, 0.0f, init);
  l.comp = bind_compressor(lay, pages, ll.comp, init);
  l.index = bind_compressor(lay, pages, ll.index, init);
  return l;
}

SequenceState bind_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                         std::unique_ptr<StatePages> pages, bool init) {
  if (!layout) layout = std::make_shared<StateLayout>(c, kDefaultPageTokens);
  if (!pages) pages = std::make_unique<HeapStatePages>(layout->page_floats());
  SequenceState s;
  const auto& ll = layout->layers();
  DI_CHECK(static_cast<int>(ll.size()) == c.num_layers + 1);
  for (int l = 0; l < c.num_layers; ++l)
    s.layers.push_back(bind_layer(*layout, *pages, ll[l], init));
  s.mtp = bind_layer(*layout, *pages, ll.back(), init);
  s.last_hidden.assign(static_cast<size_t>(c.hc_mult) * c.hidden_size, 0.0f);
  s.layout = std::move(layout);
  s.pages = std::move(pages);
  return s;
}

// What a compressor holds after n tokens follows from n alone (the entries' places too).
void adopt_compressor(CompressorState& c, int64_t n) {
  if (c.ratio == 0) return;
  c.pending = static_cast<int>(n % c.ratio);
  c.has_prev = c.width == 2 * c.dim && n >= c.ratio;
  for (int64_t e = 0; e < n / c.ratio; ++e) c.append_entry();
}

class Writer {
 public:
  void u64(uint64_t v) { raw(&v, 8); }
  void floats(const std::vector<float>& v) {
    u64(v.size());
    raw(v.data(), v.size() * 4);
  }
  template <typename Ptr>
  void rows(const std::vector<Ptr>& rows, int width) {
    u64(rows.size() * width);
    for (const float* r : rows) raw(r, size_t(width) * 4);
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
  bool floats(std::vector<float>* v) {
    uint64_t n;
    if (!u64(&n) || n != v->size()) return false;
    return raw(v->data(), n * 4);
  }
  bool rows(const std::vector<float*>& rows, int width) {
    uint64_t n;
    if (!u64(&n) || n != rows.size() * width) return false;
    for (float* r : rows)
      if (!raw(r, size_t(width) * 4)) return false;
    return true;
  }
  // The count is checked against what the token count implies before any page is touched.
  bool entries(CompressorState* c, uint64_t expect) {
    uint64_t n;
    if (!u64(&n) || n != expect * c->dim || n > (s_.size() - pos_) / 4) return false;
    for (uint64_t e = 0; e < expect; ++e)
      if (!raw(c->append_entry(), size_t(c->dim) * 4)) return false;
    return true;
  }
  bool raw(void* p, size_t n) {
    if (s_.size() - pos_ < n) return false;
    if (n) std::memcpy(p, s_.data() + pos_, n);
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
  w.rows(c.pending_kv, c.width);
  w.rows(c.pending_gate, c.width);
  w.rows(c.prev_kv, c.dim);
  w.rows(c.prev_gate, c.dim);
  w.rows(c.entries, c.dim);
}

// What a compressor holds must agree with the token count n: the forward indexes entries by
// position, so a mismatch would read past them.
bool read_comp(Reader& r, CompressorState* c, uint64_t n) {
  uint64_t pending, has_prev;
  if (!r.u64(&pending) || !r.u64(&has_prev)) return false;
  const uint64_t ratio = static_cast<uint64_t>(c->ratio);
  const bool overlap = c->ratio > 0 && c->width == 2 * c->dim;
  if (pending != (ratio ? n % ratio : 0) || (has_prev != 0) != (overlap && n >= ratio))
    return false;
  c->pending = static_cast<int>(pending);
  c->has_prev = has_prev != 0;
  return r.rows(c->pending_kv, c->width) && r.rows(c->pending_gate, c->width) &&
         r.rows(c->prev_kv, c->dim) && r.rows(c->prev_gate, c->dim) &&
         r.entries(c, ratio ? n / ratio : 0);
}

void write_layer(Writer& w, const LayerState& l, int head_dim) {
  w.rows(l.ring, head_dim);
  write_comp(w, l.comp);
  write_comp(w, l.index);
}

bool read_layer(Reader& r, LayerState* l, int head_dim, uint64_t n) {
  return r.rows(l->ring, head_dim) && read_comp(r, &l->comp, n) && read_comp(r, &l->index, n);
}

}  // namespace

float* CompressorState::append_entry() {
  DI_CHECK(pages != nullptr && place != nullptr);
  int64_t page, offset;
  layout->entry_place(*place, num_entries(), &page, &offset);
  float* row = pages->token_page(page) + offset;
  entries.push_back(row);
  return row;
}

SequenceState make_sequence_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                                  std::unique_ptr<StatePages> pages) {
  return bind_state(c, std::move(layout), std::move(pages), /*init=*/true);
}

SequenceState adopt_sequence_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                                   std::unique_ptr<StatePages> pages, int64_t num_tokens) {
  SequenceState s = bind_state(c, std::move(layout), std::move(pages), /*init=*/false);
  for (LayerState& l : s.layers) {
    adopt_compressor(l.comp, num_tokens);
    adopt_compressor(l.index, num_tokens);
  }
  s.num_tokens = num_tokens;
  return s;
}

std::string SequenceState::serialize() const {
  Writer w;
  w.u64(kMagic);
  w.u64(num_tokens);
  w.u64(static_cast<uint64_t>(last_token));
  w.u64(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    write_layer(w, layers[i], layout->layers()[i].ring.width);
  write_layer(w, mtp, layout ? layout->layers().back().ring.width : 0);
  w.floats(last_hidden);
  return std::move(w.out);
}

StatusOr<SequenceState> SequenceState::deserialize(const std::string& bytes, const Config& c,
                                                   std::shared_ptr<const StateLayout> layout,
                                                   std::unique_ptr<StatePages> pages) {
  SequenceState s = make_sequence_state(c, std::move(layout), std::move(pages));
  Reader r(bytes);
  uint64_t magic, n, last, nl;
  bool ok = r.u64(&magic) && magic == kMagic && r.u64(&n) && r.u64(&last) && r.u64(&nl) &&
            nl == s.layers.size() && n <= (uint64_t{1} << 62) &&
            (n == 0 ? last == ~uint64_t{0} : last < static_cast<uint64_t>(c.vocab_size));
  for (size_t i = 0; ok && i < s.layers.size(); ++i)
    ok = read_layer(r, &s.layers[i], c.head_dim, n);
  ok = ok && read_layer(r, &s.mtp, c.head_dim, 0) && r.floats(&s.last_hidden) && r.done();
  if (!ok) return data_loss("sequence state: corrupt or for a different config");
  s.num_tokens = static_cast<int64_t>(n);
  s.last_token = static_cast<int64_t>(last);
  return s;
}

}  // namespace deepinfer::v4
