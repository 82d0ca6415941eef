#include "deepinfer/model/eplb/routed_counts.h"

#include <cstdlib>

namespace deepinfer {

RoutedCounts::RoutedCounts(int num_layers, int num_experts)
    : num_layers_(num_layers),
      num_experts_(num_experts),
      counts_(new std::atomic<uint64_t>[static_cast<size_t>(num_layers) * num_experts]) {
  for (int64_t i = 0; i < int64_t(num_layers) * num_experts; ++i) counts_[i] = 0;
}

void RoutedCounts::add(int layer, const int* experts, int k) const {
  if (layer < 0 || layer >= num_layers_) return;
  for (int i = 0; i < k; ++i)
    if (experts[i] >= 0 && experts[i] < num_experts_)
      counts_[int64_t(layer) * num_experts_ + experts[i]].fetch_add(1, std::memory_order_relaxed);
}

RoutingCounts RoutedCounts::snapshot() const {
  RoutingCounts out(num_layers_, std::vector<uint64_t>(num_experts_));
  for (int l = 0; l < num_layers_; ++l)
    for (int e = 0; e < num_experts_; ++e)
      out[l][e] = counts_[int64_t(l) * num_experts_ + e].load(std::memory_order_relaxed);
  return out;
}

int main_layer_of(const std::string& prefix) {
  constexpr std::string_view kLayers = "layers.";
  if (prefix.rfind(kLayers, 0) != 0) return -1;
  char* end = nullptr;
  const long n = std::strtol(prefix.c_str() + kLayers.size(), &end, 10);
  return end != prefix.c_str() + kLayers.size() && *end == '.' ? static_cast<int>(n) : -1;
}

}  // namespace deepinfer
