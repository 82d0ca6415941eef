#include "deepinfer/cli/serve_bench/sse.h"

namespace deepinfer::cli::serve_bench {

void SseSplitter::line(std::string_view l) {
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  if (l.rfind("data:", 0) != 0) return;
  l.remove_prefix(5);
  if (!l.empty() && l.front() == ' ') l.remove_prefix(1);
  on_data_(l);
}

void SseSplitter::feed(std::string_view bytes) {
  buf_.append(bytes);
  size_t at = 0;
  for (size_t nl; (nl = buf_.find('\n', at)) != std::string::npos; at = nl + 1)
    line(std::string_view(buf_).substr(at, nl - at));
  buf_.erase(0, at);
}

void SseSplitter::finish() {
  if (!buf_.empty()) line(buf_);
  buf_.clear();
}

}  // namespace deepinfer::cli::serve_bench
