// The router forwards a worker's SSE stream in whole events, so that when the worker fails
// mid-stream the error event it sends starts on an event boundary and the client never sees
// half an event. `[DONE]` tells a finished stream from one whose worker died: our workers
// frame SSE by closing the connection, so the close alone says nothing.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::router {

class SseEventBuffer {
 public:
  void feed(std::string_view bytes);
  // The complete events fed so far (through the last blank line), removed from the buffer;
  // bytes unchanged.
  std::string take_complete();
  // A complete event was `data: [DONE]`.
  bool saw_done() const { return saw_done_; }
  // Bytes of an unfinished event are buffered.
  bool has_partial() const { return complete_ < buf_.size(); }

 private:
  std::string buf_;
  size_t complete_ = 0;  // buf_[0, complete_) is whole events
  size_t scanned_ = 0;   // lines before this offset are examined
  size_t line_start_ = 0;
  bool saw_done_ = false;
};

// `data: {"error": {...}}` and `data: [DONE]`, as the server ends a failed stream.
std::string sse_error_events(std::string_view message, std::string_view code);

}  // namespace deepinfer::router
