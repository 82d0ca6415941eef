#include "deepinfer/runtime/cuda/dspark_tracks.h"

#include <algorithm>
#include <string>

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::runtime::cuda {

using deepinfer::cuda::DeviceBuffer;

namespace {
constexpr int64_t kKeptTapRows = 64;  // more than any verification row (drafts + replay)
}  // namespace

DsparkTracks::Track DsparkTracks::fresh(int64_t start) const {
  Track t;
  t.rings = DeviceBuffer<float>(size_t(d_.state_floats()));
  DI_CUDA_CHECK(cudaMemset(t.rings.get(), 0, t.rings.size() * sizeof(float)));
  t.num_tokens = t.start = start;
  return t;
}

bool DsparkTracks::exact(const Track& t) const {
  return t.start == 0 || t.num_tokens >= t.start + d_.window();
}

Status DsparkTracks::absorb(Track& t, int64_t upto) {
  const int64_t n = upto - t.num_tokens;
  if (n <= 0) return ok_status();
  const int64_t offset = t.num_tokens - t.taps_pos;
  if (offset < 0 || offset + n > t.taps_rows)
    return internal_error("DSpark: positions [" + std::to_string(t.num_tokens) + ", " +
                          std::to_string(upto) + ") are not in the held taps (positions " +
                          std::to_string(t.taps_pos) + " on, " + std::to_string(t.taps_rows) +
                          " rows)");
  // Only the last window of them can be read again (a row depends on its own taps alone).
  const int64_t skip = std::max<int64_t>(0, n - d_.window());
  RETURN_IF_ERROR(d_.absorb(t.rings.get(), t.taps.get() + (offset + skip) * d_.tap_width(),
                            n - skip, t.num_tokens + skip));
  t.num_tokens = upto;
  return ok_status();
}

StatusOr<float*> DsparkTracks::taps_for(uint64_t seq, int64_t first_pos, int64_t rows,
                                        int32_t first_constant_page) {
  auto it = tracks_.find(seq);
  if (it == tracks_.end() || first_pos == 0) {  // new: fresh, a fork's, or adopted past 0
    auto parent = forks_.find(first_constant_page);
    Track t;
    if (first_pos > 0 && parent != forks_.end() && parent->second.num_tokens == first_pos)
      t = std::move(parent->second);
    else
      t = fresh(first_pos);
    if (parent != forks_.end()) forks_.erase(parent);
    it = tracks_.insert_or_assign(seq, std::move(t)).first;
  }
  Track& t = it->second;
  t.first_constant_page = first_constant_page;
  RETURN_IF_ERROR(settle(t));  // a new row without a rollback: the speculative one was kept
  if (t.num_tokens < first_pos) t = fresh(first_pos);  // a gap: rebuild from here
  if (t.taps_capacity < rows) {
    t.taps = DeviceBuffer<float>(size_t(rows * d_.tap_width()));
    t.taps_capacity = rows;
  }
  t.taps_pos = first_pos;
  t.taps_rows = rows;
  t.length = first_pos + rows;
  return t.taps.get();
}

Status DsparkTracks::settle(Track& t) {
  if (!t.unsettled) return ok_status();
  t.unsettled = false;
  return absorb(t, t.taps_pos + t.taps_rows);
}

Status DsparkTracks::after_row(uint64_t seq, bool speculative) {
  auto it = tracks_.find(seq);
  if (it == tracks_.end()) return ok_status();
  Track& t = it->second;
  if (speculative) {
    t.unsettled = true;
    return ok_status();
  }
  RETURN_IF_ERROR(absorb(t, t.taps_pos + t.taps_rows));
  // A prefill chunk's taps (rows x taps x hidden: 126 MB for 2048 rows at V4.1's dims) are not
  // kept past the row; a decode or verification row's few are.
  if (t.taps_capacity > kKeptTapRows) {
    t.taps = {};
    t.taps_capacity = 0;
  }
  return ok_status();
}

Status DsparkTracks::on_rollback(uint64_t seq, int64_t num_tokens) {
  auto it = tracks_.find(seq);
  if (it == tracks_.end()) return ok_status();
  it->second.length = num_tokens;
  if (!it->second.unsettled) return ok_status();
  it->second.unsettled = false;
  return absorb(it->second, num_tokens);
}

Status DsparkTracks::on_copy(int32_t from, int32_t to) {
  for (auto& [id, t] : tracks_) {
    if (t.first_constant_page != from) continue;
    RETURN_IF_ERROR(settle(t));
    Track child = fresh(t.start);
    DI_CUDA_CHECK(cudaMemcpy(child.rings.get(), t.rings.get(), t.rings.size() * sizeof(float),
                             cudaMemcpyDeviceToDevice));
    child.num_tokens = t.num_tokens;
    forks_.insert_or_assign(to, std::move(child));
    return ok_status();
  }
  forks_.erase(to);
  return ok_status();
}

Status DsparkTracks::draft(uint64_t seq, int32_t token, int64_t k, int64_t max_len,
                           std::vector<int32_t>* out) {
  auto it = tracks_.find(seq);
  if (k < 1 || it == tracks_.end()) return ok_status();
  Track& t = it->second;
  RETURN_IF_ERROR(settle(t));  // asked before any rollback: the row was kept whole
  if (t.num_tokens != t.length)
    return internal_error("DSpark drafting for sequence " + std::to_string(seq) +
                          ": its windows "
                          "hold " +
                          std::to_string(t.num_tokens) + " positions, the sequence " +
                          std::to_string(t.length));
  if (!exact(t) || t.length < 1) return ok_status();
  v41::DsparkProposal p;
  RETURN_IF_ERROR(d_.propose(t.rings.get(), t.length, token, &p));
  const int64_t room = std::max<int64_t>(0, max_len - t.length);
  const size_t n = std::min({p.tokens.size(), size_t(k), size_t(room)});
  out->assign(p.tokens.begin(), p.tokens.begin() + n);
  return ok_status();
}

}  // namespace deepinfer::runtime::cuda
