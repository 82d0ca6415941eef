// The memory a SequenceState's rows live in. The engine hands out pages of the KV pool; a
// standalone state (tests, tools, a serialized snapshot) owns heap pages made on first use.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer::v4 {

class StatePages {
 public:
  virtual ~StatePages() = default;
  // The k-th page of the sequence's constant state (k < StateLayout::constant_pages()).
  virtual float* constant_page(int64_t k) = 0;
  // The page holding growing state for tokens [p * page_tokens, (p + 1) * page_tokens). The
  // caller has reserved it: the forward only writes entries for tokens it is processing.
  virtual float* token_page(int64_t p) = 0;
};

class HeapStatePages final : public StatePages {
 public:
  explicit HeapStatePages(int64_t page_floats) : page_floats_(page_floats) {}
  float* constant_page(int64_t k) override { return get(constant_, k); }
  float* token_page(int64_t p) override { return get(tokens_, p); }

 private:
  float* get(std::vector<std::unique_ptr<float[]>>& pages, int64_t i);
  int64_t page_floats_;
  std::vector<std::unique_ptr<float[]>> constant_, tokens_;
};

}  // namespace deepinfer::v4
