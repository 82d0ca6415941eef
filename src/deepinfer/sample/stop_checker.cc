#include "deepinfer/sample/stop_checker.h"

#include <algorithm>
#include <string_view>

namespace deepinfer::sample {

StopChecker::StopChecker(const SamplingParams& p, int32_t eos_token_id)
    : stop_(p.stop),
      stop_token_ids_(p.stop_token_ids),
      eos_token_id_(eos_token_id),
      max_tokens_(p.max_tokens),
      min_tokens_(p.min_tokens),
      include_stop_(p.include_stop_str_in_output),
      ignore_eos_(p.ignore_eos) {
  for (const auto& s : stop_) max_stop_len_ = std::max(max_stop_len_, s.size());
  pending_.reserve(2 * max_stop_len_ + 64);
}

std::string StopChecker::finish(std::string text, const char* reason) {
  finished_ = true;
  reason_ = reason;
  pending_.clear();
  return text;
}

size_t StopChecker::held_back_length() const {
  const std::string_view text(pending_);
  const size_t longest = std::min(text.size(), max_stop_len_ == 0 ? 0 : max_stop_len_ - 1);
  for (size_t len = longest; len > 0; --len) {
    const std::string_view suffix = text.substr(text.size() - len);
    for (const auto& s : stop_) {
      if (s.size() > len && std::string_view(s).starts_with(suffix)) return len;
    }
  }
  return 0;
}

std::string StopChecker::push(int32_t token, const std::string& delta, bool* finished,
                              std::string* reason) {
  auto report = [&] {
    *finished = finished_;
    if (reason != nullptr) *reason = reason_;
  };
  if (finished_) {
    report();
    return "";
  }
  ++num_tokens_;
  const bool can_stop = num_tokens_ > min_tokens_;
  std::string out;

  const bool is_eos = !ignore_eos_ && eos_token_id_ >= 0 && token == eos_token_id_;
  const bool is_stop_token =
      std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
  if (can_stop && (is_eos || is_stop_token)) {
    out = std::move(pending_);
    if (include_stop_) out += delta;
    if (!is_eos) matched_ = std::to_string(token);
    out = finish(std::move(out), "stop");
    report();
    return out;
  }

  pending_ += delta;
  if (can_stop && !stop_.empty()) {
    // pending_ is the held-back tail (shorter than any stop string) plus this delta, so a
    // match that ends in this delta lies inside it.
    size_t best_pos = std::string::npos;
    const std::string* best = nullptr;
    for (const auto& s : stop_) {
      const size_t pos = pending_.find(s);
      if (pos < best_pos) {
        best_pos = pos;
        best = &s;
      }
    }
    if (best != nullptr) {
      out = pending_.substr(0, best_pos + (include_stop_ ? best->size() : 0));
      matched_ = *best;
      out = finish(std::move(out), "stop");
      report();
      return out;
    }
  }

  if (num_tokens_ >= max_tokens_) {
    out = finish(std::move(pending_), "length");
    report();
    return out;
  }
  const size_t hold = held_back_length();
  out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  report();
  return out;
}

std::string StopChecker::flush() {
  if (finished_) return "";
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace deepinfer::sample
