#include "deepinfer/router/sse_events.h"

#include <nlohmann/json.hpp>

namespace deepinfer::router {

void SseEventBuffer::feed(std::string_view bytes) {
  buf_.append(bytes);
  for (; scanned_ < buf_.size(); ++scanned_) {
    if (buf_[scanned_] != '\n') continue;
    std::string_view line(buf_.data() + line_start_, scanned_ - line_start_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) complete_ = scanned_ + 1;  // a blank line ends the event
    if (line == "data: [DONE]" || line == "data:[DONE]") saw_done_ = true;
    line_start_ = scanned_ + 1;
  }
}

std::string SseEventBuffer::take_complete() {
  std::string out = buf_.substr(0, complete_);
  buf_.erase(0, complete_);
  scanned_ -= complete_;
  line_start_ -= complete_;
  complete_ = 0;
  return out;
}

std::string sse_error_events(std::string_view message, std::string_view code) {
  nlohmann::json err = {
      {"error",
       {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", code}}}};
  return "data: " + err.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n\ndata: [DONE]\n\n";
}

}  // namespace deepinfer::router
