// StepRow::snapshots as every runner checks them before a row runs (step_batch.h). Header-only:
// the CUDA runner's library uses only runtime headers (cuda/CMakeLists.txt).
#pragma once

#include <algorithm>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/page_spec.h"
#include "deepinfer/runtime/step_batch.h"

namespace deepinfer::runtime {

// ok, or invalid_argument naming `row` (e.g. "row 2 (sequence 7)") and the snapshot: a
// speculative row with snapshots, an end_pos outside (start_pos, start_pos + num_tokens) or not
// after the previous one, pages missing, not constant_pages_per_seq of them, outside the pool,
// or among the row's own constant pages.
inline Status check_row_snapshots(const StepRow& r, const kv::PageSpec& spec,
                                  const std::string& row) {
  if (r.snapshots.empty()) return ok_status();
  if (r.speculative) return invalid_argument(row + ": a speculative row takes no snapshots");
  int64_t after = r.start_pos;
  for (size_t k = 0; k < r.snapshots.size(); ++k) {
    const RowSnapshot& s = r.snapshots[k];
    const std::string name = row + ", snapshot " + std::to_string(k);
    if (s.end_pos <= after || s.end_pos >= r.start_pos + r.num_tokens)
      return invalid_argument(name + ": end_pos " + std::to_string(s.end_pos) +
                              " is not inside the row's positions (" + std::to_string(after) +
                              ", " + std::to_string(r.start_pos + r.num_tokens) + ")");
    after = s.end_pos;
    if (s.pages == nullptr || static_cast<int64_t>(s.pages->size()) != spec.constant_pages_per_seq)
      return invalid_argument(name + ": " + std::to_string(s.pages ? s.pages->size() : 0) +
                              " pages, the layout's constant state has " +
                              std::to_string(spec.constant_pages_per_seq));
    for (int32_t p : *s.pages) {
      if (p < 0 || p >= spec.num_pages)
        return invalid_argument(name + ": page " + std::to_string(p) + " is outside the pool of " +
                                std::to_string(spec.num_pages) + " pages");
      if (r.state_pages &&
          std::find(r.state_pages->begin(), r.state_pages->end(), p) != r.state_pages->end())
        return invalid_argument(name + ": page " + std::to_string(p) +
                                " is one of the row's own constant pages");
    }
  }
  return ok_status();
}

}  // namespace deepinfer::runtime
