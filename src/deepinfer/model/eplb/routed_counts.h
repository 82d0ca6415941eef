// Routed picks per main layer per expert, counted by the forward (EPLB's input, issue 22):
// relaxed atomic counters, so the MoE's parallel routing adds without a lock and a reader on
// another thread (the server's GET /expert_counts) takes a snapshot at any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "deepinfer/model/eplb/placement_json.h"

namespace deepinfer {

class RoutedCounts {
 public:
  RoutedCounts(int num_layers, int num_experts);
  // Adds one pick for each of experts[0..k). A layer outside [0, num_layers) (MTP, DSpark) is
  // not counted.
  void add(int layer, const int* experts, int k) const;
  RoutingCounts snapshot() const;

 private:
  int num_layers_, num_experts_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
};

// "layers.N." (or "layers.N.ffn.") -> N; anything else (MTP, DSpark stages) -> -1.
int main_layer_of(const std::string& prefix);

}  // namespace deepinfer
