// Server-sent events as OpenAI-compatible servers stream them: the body split into lines, each
// `data: ...` line's payload handed on (`[DONE]` included; comments and other fields skipped).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace deepinfer::cli::serve_bench {

class SseSplitter {
 public:
  explicit SseSplitter(std::function<void(std::string_view)> on_data)
      : on_data_(std::move(on_data)) {}
  void feed(std::string_view bytes);
  // The body ended: a last line without its newline still counts.
  void finish();

 private:
  void line(std::string_view l);
  std::function<void(std::string_view)> on_data_;
  std::string buf_;
};

}  // namespace deepinfer::cli::serve_bench
