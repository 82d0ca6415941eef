#include "deepinfer/model/deepseek_v4/state_pages.h"

#include "deepinfer/base/check.h"

namespace deepinfer::v4 {

float* HeapStatePages::get(std::vector<std::unique_ptr<float[]>>& pages, int64_t i) {
  DI_CHECK(i >= 0);
  if (static_cast<int64_t>(pages.size()) <= i) pages.resize(i + 1);
  if (!pages[i]) pages[i] = std::make_unique<float[]>(page_floats_);  // zeroed
  return pages[i].get();
}

}  // namespace deepinfer::v4
