#include "deepinfer/server/worker_registration.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "deepinfer/base/socket_io.h"

namespace deepinfer::server {

StatusOr<HttpAddress> parse_http_url(const std::string& url, const std::string& flag) {
  auto bad = [&](const std::string& why) {
    return invalid_argument(flag + ": '" + url + "': " + why);
  };
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return bad("must start with http://");
  std::string rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) return bad("must be http://host:port, with no path");
  if (rest.rfind(':') == std::string::npos) return bad("must name a port (http://host:port)");
  auto hp = net::split_host_port(rest);
  if (!hp.ok()) return bad(hp.status().message());
  return HttpAddress{std::move(hp->first), hp->second};
}

StatusOr<int> post_json(const HttpAddress& at, const std::string& path, const std::string& body,
                        double timeout_s) {
  const std::string what = "POST http://" + at.host + ":" + std::to_string(at.port) + path;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  ASSIGN_OR_RETURN(net::Fd fd, net::connect_tcp(at.host, at.port, timeout_s, what));
  const std::string req =
      "POST " + path + " HTTP/1.1\r\nHost: " + at.host + ":" + std::to_string(at.port) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  RETURN_IF_ERROR(net::write_all(fd.get(), req, deadline, what));
  // The status line is all we need: "HTTP/1.1 200 ..." (12 bytes).
  char line[12];
  RETURN_IF_ERROR(net::read_exact(fd.get(), line, sizeof(line), deadline, what));
  const std::string s(line, sizeof(line));
  if (s.rfind("HTTP/1.", 0) != 0 || s[8] != ' ')
    return failed_precondition(what + ": not an HTTP response");
  const std::string code = s.substr(9, 3);
  if (code.find_first_not_of("0123456789") != std::string::npos)
    return failed_precondition(what + ": not an HTTP status");
  return std::stoi(code);
}

StatusOr<std::unique_ptr<WorkerRegistration>> WorkerRegistration::start(RegistrationOptions o) {
  ASSIGN_OR_RETURN(HttpAddress router, parse_http_url(o.router_url, "--register-with"));
  RETURN_IF_ERROR(parse_http_url(o.worker_url, "--advertise-url").status());
  return std::unique_ptr<WorkerRegistration>(new WorkerRegistration(std::move(o), router));
}

WorkerRegistration::WorkerRegistration(RegistrationOptions o, HttpAddress router)
    : o_(std::move(o)), router_(std::move(router)) {
  thread_ = std::thread([this] { loop(); });
}

WorkerRegistration::~WorkerRegistration() { leave(); }

std::string WorkerRegistration::beat() {
  const nlohmann::json body = {{"url", o_.worker_url}, {"role", o_.role}, {"ttl_s", o_.ttl_s}};
  StatusOr<int> code = post_json(router_, "/router/workers", body.dump(), o_.timeout_s);
  if (!code.ok()) return code.status().to_string();
  if (*code != 200) return "HTTP " + std::to_string(*code);
  ++acked_;
  return "";
}

// Logs when the registration starts failing and when it works again, not every heartbeat.
void WorkerRegistration::loop() {
  bool ok_before = true;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const std::string error = beat();
    if (!error.empty() && ok_before)
      std::fprintf(stderr, "deepinfer serve: registration with %s failed: %s (retrying)\n",
                   o_.router_url.c_str(), error.c_str());
    if (error.empty() && !ok_before)
      std::fprintf(stderr, "deepinfer serve: registered with %s again\n", o_.router_url.c_str());
    ok_before = error.empty();
    lock.lock();
    cv_.wait_for(lock, std::chrono::duration<double>(o_.interval_s), [&] { return stop_; });
  }
}

void WorkerRegistration::leave() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (left_) return;
    left_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  const nlohmann::json body = {{"url", o_.worker_url}};
  StatusOr<int> code = post_json(router_, "/router/workers/leave", body.dump(), o_.timeout_s);
  if (!code.ok() || *code != 200)
    std::fprintf(
        stderr, "deepinfer serve: leaving %s failed: %s\n", o_.router_url.c_str(),
        code.ok() ? ("HTTP " + std::to_string(*code)).c_str() : code.status().to_string().c_str());
}

}  // namespace deepinfer::server
