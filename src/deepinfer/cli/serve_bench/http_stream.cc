#include "deepinfer/cli/serve_bench/http_stream.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace deepinfer::cli::serve_bench {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

StatusOr<BaseUrl> parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    return invalid_argument("--base-url '" + url +
                            "': expected http://host[:port][/path] (https is not supported)");
  BaseUrl b;
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) b.prefix = rest.substr(slash);
  while (!b.prefix.empty() && b.prefix.back() == '/') b.prefix.pop_back();
  const size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    const std::string port = hostport.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535)
      return invalid_argument("--base-url '" + url + "': port '" + port + "' is not 1..65535");
    b.port = static_cast<int>(p);
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) return invalid_argument("--base-url '" + url + "': no host");
  b.host = hostport;
  return b;
}

Status ResponseReader::parse_head(std::string_view head) {
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  // HTTP/1.x SSS reason
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12 || line[8] != ' ')
    return data_loss("malformed status line '" + std::string(line.substr(0, 80)) + "'");
  status_ = std::atoi(std::string(line.substr(9, 3)).c_str());
  if (status_ < 100 || status_ > 599)
    return data_loss("status code '" + std::string(line.substr(9, 3)) + "'");
  bool have_length = false;
  size_t at = eol == std::string_view::npos ? head.size() : eol + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view h = head.substr(at, end - at);
    at = end + 2;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = lower(trim(h.substr(0, colon)));
    const std::string value = lower(trim(h.substr(colon + 1)));
    if (name == "transfer-encoding" && value.find("chunked") != std::string::npos) chunked_ = true;
    if (name == "content-length") {
      have_length = true;
      remaining_ = std::strtoll(value.c_str(), nullptr, 10);
      if (remaining_ < 0) return data_loss("Content-Length '" + value + "'");
    }
  }
  if (chunked_) {
    state_ = State::kChunkSize;
  } else if (have_length) {
    state_ = remaining_ == 0 ? State::kDone : State::kBody;
  } else {
    until_close_ = true;
    state_ = State::kBody;
  }
  return Status();
}

Status ResponseReader::feed(std::string_view bytes) {
  buf_.append(bytes);
  size_t at = 0;
  while (state_ != State::kDone) {
    const std::string_view rest = std::string_view(buf_).substr(at);
    if (state_ == State::kHead) {
      const size_t end = rest.find("\r\n\r\n");
      if (end == std::string_view::npos) {
        if (rest.size() > 65536) return data_loss("response headers exceed 64 KiB");
        break;
      }
      RETURN_IF_ERROR(parse_head(rest.substr(0, end + 2)));
      at += end + 4;
    } else if (state_ == State::kBody) {
      if (rest.empty()) break;
      const size_t n = until_close_
                           ? rest.size()
                           : static_cast<size_t>(std::min<int64_t>(remaining_, rest.size()));
      on_body_(rest.substr(0, n));
      at += n;
      if (!until_close_ && (remaining_ -= static_cast<int64_t>(n)) == 0) state_ = State::kDone;
    } else if (state_ == State::kChunkSize || state_ == State::kChunkDataEnd ||
               state_ == State::kTrailer) {
      const size_t eol = rest.find("\r\n");
      if (eol == std::string_view::npos) break;
      const std::string_view line = rest.substr(0, eol);
      at += eol + 2;
      if (state_ == State::kChunkDataEnd) {
        if (!line.empty()) return data_loss("chunk data not followed by CRLF");
        state_ = State::kChunkSize;
      } else if (state_ == State::kTrailer) {
        if (line.empty()) state_ = State::kDone;
      } else {
        const std::string size(line.substr(0, line.find(';')));
        char* end = nullptr;
        remaining_ = std::strtoll(size.c_str(), &end, 16);
        if (size.empty() || (*end != '\0' && *end != ' ') || remaining_ < 0)
          return data_loss("chunk size '" + size + "'");
        state_ = remaining_ == 0 ? State::kTrailer : State::kChunkData;
      }
    } else {  // kChunkData
      if (rest.empty()) break;
      const size_t n = static_cast<size_t>(std::min<int64_t>(remaining_, rest.size()));
      on_body_(rest.substr(0, n));
      at += n;
      if ((remaining_ -= static_cast<int64_t>(n)) == 0) state_ = State::kChunkDataEnd;
    }
  }
  buf_.erase(0, at);
  return Status();
}

Status ResponseReader::finish() {
  if (state_ == State::kDone || (state_ == State::kBody && until_close_)) {
    state_ = State::kDone;
    return Status();
  }
  return data_loss(state_ == State::kHead ? "connection closed before the response headers"
                                          : "connection closed inside the response body");
}

StatusOr<HttpResult> http_request(const BaseUrl& base, const std::string& path,
                                  const std::string& body, double timeout_s,
                                  const ResponseReader::BodyFn& on_body) {
  const std::string where = base.host + ":" + std::to_string(base.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(base.host.c_str(), std::to_string(base.port).c_str(), &hints, &found);
      rc != 0)
    return failed_precondition(where + ": " + gai_strerror(rc));
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return failed_precondition(where + ": cannot connect: " + std::strerror(errno));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - double(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string req = (body.empty() ? "GET " : "POST ") + base.prefix + path +
                    " HTTP/1.1\r\nHost: " + where + "\r\nConnection: close\r\nAccept: */*\r\n";
  if (!body.empty())
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "closed";
      ::close(fd);
      return failed_precondition(where + ": send failed: " + why);
    }
    sent += static_cast<size_t>(n);
  }
  ResponseReader reader(on_body);
  char buf[16384];
  Status st;
  while (!reader.done()) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      st = errno == EAGAIN || errno == EWOULDBLOCK
               ? failed_precondition(where + ": no answer within " + std::to_string(timeout_s) +
                                     " s")
               : failed_precondition(where + ": recv failed: " + std::strerror(errno));
      break;
    }
    if (n == 0) {
      st = reader.finish();
      break;
    }
    st = reader.feed(std::string_view(buf, static_cast<size_t>(n)));
    if (!st.ok()) break;
  }
  ::close(fd);
  if (!st.ok()) return st;
  return HttpResult{reader.status()};
}

}  // namespace deepinfer::cli::serve_bench
