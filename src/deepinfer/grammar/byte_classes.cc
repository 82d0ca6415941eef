#include "deepinfer/grammar/byte_classes.h"

namespace deepinfer::grammar {

ByteClasses::ByteClasses(const std::vector<ByteSet>& sets) {
  // Refine one partition by every set: a class splits into its bytes inside and outside.
  // Ids stay dense (< 256), so each split is two small arrays, O(256) per set.
  std::array<uint16_t, 256> id{};
  int count = 1;
  for (const ByteSet& s : sets) {
    std::array<int16_t, 512> remap;
    remap.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      int16_t& to = remap[id[b] * 2 + (s.test(b) ? 1 : 0)];
      if (to < 0) to = static_cast<int16_t>(next++);
      id[b] = static_cast<uint16_t>(to);
    }
    count = next;
  }
  members_.resize(count);
  for (int b = 0; b < 256; ++b) {
    class_of_[b] = static_cast<uint8_t>(id[b]);
    members_[id[b]].push_back(static_cast<uint8_t>(b));
  }
}

}  // namespace deepinfer::grammar
