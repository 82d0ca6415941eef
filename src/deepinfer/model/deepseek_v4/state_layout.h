// Where every float of a sequence's state lives in fixed-size pages (spec §7), for the CPU and
// the CUDA runner alike (fp32 on both). Constant state (sliding-window rings, compressor partial
// windows and overlap halves) is cut into buffers of rows packed into the sequence's constant
// pages, each buffer whole within one page. Growing state (compressed
// entries, indexer keys) goes into token pages: page p holds, per compressed layer, the entries
// whose last token falls in tokens [p*page_tokens, (p+1)*page_tokens).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

struct RowPlace {
  int64_t page = 0;    // index among the sequence's constant pages
  int64_t offset = 0;  // floats from the page start
};

// A buffer of `rows` rows of `width` floats: rows [first, first + rows) of constant_rows(),
// consecutive in one page.
struct RowBuffer {
  int64_t first = 0;
  int rows = 0;
  int width = 0;
};

// Constant buffers packed into pages of page_floats floats in the order added, each buffer whole
// within one page (a kernel addresses it from its first row); page_floats must hold the widest.
// Both families' StateLayouts place their constant state with it.
class ConstantRows {
 public:
  explicit ConstantRows(int64_t page_floats = 0) : page_floats_(page_floats) {}
  RowBuffer add(int rows, int width);
  const std::vector<RowPlace>& rows() const { return rows_; }
  int64_t pages() const { return rows_.empty() ? 0 : page_ + 1; }
  // Where a buffer's first row lies; row i follows at offset + i * width in the same page.
  RowPlace buffer_place(const RowBuffer& b) const;

 private:
  int64_t page_floats_;
  int64_t page_ = 0, used_ = 0;
  std::vector<RowPlace> rows_;
};

// What every family's StateLayout has: pages of page_tokens tokens of growing state, page_floats
// floats each, and the constant rows packed into them. The family's constructor sets page_floats_
// from its growing state and largest buffer, then packs constant_.
class PageGeometry {
 public:
  int page_tokens() const { return page_tokens_; }
  int64_t page_floats() const { return page_floats_; }
  int64_t page_bytes() const { return page_floats_ * 4; }
  int64_t constant_pages() const { return constant_.pages(); }
  const std::vector<RowPlace>& constant_rows() const { return constant_.rows(); }
  // Where a buffer's first row lies; row i follows at offset + i * width in the same page.
  RowPlace buffer_place(const RowBuffer& b) const { return constant_.buffer_place(b); }

 protected:
  explicit PageGeometry(int page_tokens) : page_tokens_(page_tokens) {}
  int page_tokens_ = 0;
  int64_t page_floats_ = 0;
  ConstantRows constant_;
};

struct CompressorLayout {
  int ratio = 0;  // 0: the layer has no such compressor
  int width = 0;  // channels per pushed token: 2*dim when overlapping (CSA), else dim
  int dim = 0;
  RowBuffer pending_kv, pending_gate;  // ratio x width
  RowBuffer prev_kv, prev_gate;        // CSA: ratio x dim
  int64_t entry_offset = 0;            // floats into a token page where this layer's slots begin
  int slots_per_page = 0;              // most entries that can end in one page
};

struct LayerLayout {
  RowBuffer ring;  // sliding_window x head_dim
  CompressorLayout comp, index;
};

class StateLayout : public PageGeometry {
 public:
  // page_tokens must be positive.
  StateLayout(const Config& c, int page_tokens);

  // num_layers main layers, then the MTP layer (sliding window only).
  const std::vector<LayerLayout>& layers() const { return layers_; }

  // Token page and float offset of entry e of a compressor laid out as `cl`.
  void entry_place(const CompressorLayout& cl, int64_t e, int64_t* page, int64_t* offset) const;

 private:
  std::vector<LayerLayout> layers_;
};

}  // namespace deepinfer::v4
