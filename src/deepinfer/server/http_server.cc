#include "deepinfer/server/http_server.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <unordered_map>

#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/server/access_log.h"
#include "deepinfer/server/metrics.h"
#include "deepinfer/server/protocol.h"

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<uint64_t> g_next_id{1};

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class Session;

// State shared by all sessions; touched by the io thread only (except `engine`).
struct Shared {
  ServerOptions options;
  std::atomic<Engine*> engine{nullptr};
  Metrics metrics;
  std::unique_ptr<AccessLog> log;
  bool draining = false;
  std::unordered_map<std::string, std::weak_ptr<Session>> live;  // submitted, not finished
};

ApiError timeout_error(double s) {
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%g", s);
  return {408, std::string("request timed out after ") + secs + " s (--request-timeout)",
          "timeout_error", "", "request_timeout"};
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared* shared)
      : socket_(std::move(socket)), shared_(shared), timer_(socket_.get_executor()) {
    beast::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void start() { read_request(); }

  // Drain deadline passed: abort the engine request (its final event is still sent).
  void cancel() {
    if (submitted_ && !finished_ && !cancelled_) {
      cancelled_ = true;
      engine_->cancel(id_);
    }
  }

 private:
  void read_request() {
    parser_.emplace();
    parser_->body_limit(shared_->options.max_body_bytes);
    buffer_.clear();
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void begin_exchange(std::string method, std::string path) {
    start_ = Clock::now();
    created_ = now_s();  // keep-alive: each request gets its own timestamp
    method_ = std::move(method);
    path_ = std::move(path);
    busy_ = true;
    ++shared_->metrics.busy;
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      linger_ = true;
      // The header was read; only the body was refused.
      const auto& head = parser_->get();
      std::string target(head.target());
      begin_exchange(std::string(head.method_string()), target.substr(0, target.find('?')));
      return send_error(body_too_large_error(shared_->options.max_body_bytes));
    }
    if (ec) return close();
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive() && !shared_->draining;
    std::string target(req.target());
    std::string path = target.substr(0, target.find('?'));
    begin_exchange(std::string(req.method_string()), path);
    // Probes and scrapers never need the key.
    if (path == "/health") {
      bool ready = shared_->engine.load() != nullptr && !shared_->draining;
      return send(ready ? 200 : 503, ready ? "{\"status\":\"ok\"}" : "{\"status\":\"loading\"}");
    }
    if (path == "/metrics" && req.method() == http::verb::get)
      return send(200, shared_->metrics.render(shared_->options.model_name, shared_->engine.load()),
                  "text/plain; version=0.0.4; charset=utf-8");
    if (!shared_->options.api_key.empty()) {
      auto it = req.find(http::field::authorization);
      if (it == req.end() || it->value() != "Bearer " + shared_->options.api_key)
        return send_error(unauthorized_error());
    }
    Engine* engine = shared_->engine.load();
    if (path == "/v1/models" && req.method() == http::verb::get)
      return send(200, models_response(shared_->options.model_name, created_).dump());
    std::optional<Endpoint> ep;
    if (path == "/v1/completions" && req.method() == http::verb::post) ep = Endpoint::kCompletions;
    if (path == "/v1/chat/completions" && req.method() == http::verb::post)
      ep = Endpoint::kChatCompletions;
    if (!ep) return send_error(not_found_error(path));
    if (shared_->draining)
      return send_error({503, "the server is shutting down", "server_error", "", "shutting_down"});
    if (engine == nullptr)
      return send_error({503, "the model is still loading", "server_error", "", "loading"});
    engine_ = engine;
    ApiError err;
    if (!parse_request(*ep, req.body(), engine->vocab_size(), &req_, &err)) return send_error(err);
    if (overloaded())
      return send_error({429,
                         "too many requests are waiting (--max-waiting-requests " +
                             std::to_string(shared_->options.max_waiting_requests) + ")",
                         "rate_limit_error", "", "overloaded"});
    submit(*ep);
  }

  // Running: the engine's per-step snapshot, or the requests already streaming tokens if more
  // (the snapshot can lag a step). What the server has submitted beyond that is waiting.
  bool overloaded() const {
    const int64_t limit = shared_->options.max_waiting_requests;
    if (limit < 0) return false;
    const int64_t running = std::max(engine_->stats().num_running, shared_->metrics.generating);
    const int64_t waiting = shared_->metrics.in_flight - running;
    return waiting >= limit;
  }

  void submit(Endpoint ep) {
    id_ = std::string(ep == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") +
          std::to_string(g_next_id.fetch_add(1));
    req_.gen.request_id = id_;
    const size_t n = static_cast<size_t>(std::max(1, req_.gen.params.n));
    if (req_.stream && ep == Endpoint::kChatCompletions)
      parsers_.assign(n, recipe::StreamingParser(req_.thinking));
    if (ep == Endpoint::kChatCompletions && !req_.max_tokens_given) default_max_tokens();
    first_chunk_.assign(n, true);
    sample_done_.assign(n, false);
    text_offset_.assign(n, 0);
    auto self = shared_from_this();
    auto* ioc = &static_cast<asio::io_context&>(socket_.get_executor().context());
    Status st = engine_->submit(req_.gen, [self, ioc](const RequestOutput& out) {
      // Engine thread: hand a copy to the io thread, which owns the session.
      asio::post(*ioc, [self, out]() { self->on_output(out); });
    });
    if (!st.ok()) {
      // Grammar errors name so_args (the engine's field); the client sent response_format.
      const bool grammar = req_.response_format && st.message().rfind("so_args", 0) == 0;
      return send_error(error_from_status(st, grammar ? "response_format" : ""));
    }
    submitted_ = true;
    ++shared_->metrics.in_flight;
    shared_->live[id_] = self;
    if (shared_->options.request_timeout_s > 0) {
      timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(shared_->options.request_timeout_s)));
      timer_.async_wait([self](beast::error_code ec) {
        if (ec || self->finished_) return;
        self->timed_out_ = true;
        self->cancel();
      });
    }
    if (req_.stream) start_stream();
  }

  // OpenAI's chat default is "up to the context length" (vLLM: max_model_len - prompt), not
  // the completions API's 16; it needs the prompt's length, hence the extra encode.
  void default_max_tokens() {
    auto text = recipe::encode_chat_request(*req_.gen.chat);
    if (!text.ok()) return;  // submit reports the error
    auto ids = engine_->tokenize(*text);
    if (!ids.ok()) return;
    // Bounded by the KV pool too: a length the pool cannot hold would be a 400.
    const int64_t limit =
        std::min(shared_->options.max_model_len, engine_->capacity().max_tokens + 1);
    const int64_t room = limit - static_cast<int64_t>(ids->size());
    if (room > 0) req_.gen.params.max_tokens = static_cast<int>(std::min<int64_t>(room, INT32_MAX));
  }

  std::string model_name() const {
    return req_.model.empty() ? shared_->options.model_name : req_.model;
  }

  void start_stream() {
    streaming_ = true;
    enqueue(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n");
    // The client sends nothing more; a completed read means it went away: cancel.
    socket_.async_read_some(asio::buffer(probe_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec && !self->finished_) self->cancel();
                            });
  }

  int64_t reasoning_tokens(const std::string& text) const {
    if (text.empty()) return 0;
    auto ids = engine_->tokenize(text);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : 0;
  }

  TokenText token_text() const {
    if (!req_.gen.params.logprobs) return {};
    const Engine* e = engine_;
    return [e](int32_t id) {
      auto s = e->detokenize({id});
      return s.ok() ? *s : std::string();
    };
  }

  // TTFT from the first update carrying tokens, ITL between later ones (vLLM's definitions).
  void observe_tokens(const RequestOutput& out) {
    int64_t tokens = 0;
    for (const CompletionOutput& c : out.outputs)
      tokens += static_cast<int64_t>(c.token_ids.size());
    if (tokens <= tokens_seen_) return;
    auto now = Clock::now();
    if (tokens_seen_ == 0) {
      shared_->metrics.on_first_token(std::chrono::duration<double>(now - start_).count());
      ++shared_->metrics.generating;
    } else
      shared_->metrics.on_inter_token(std::chrono::duration<double>(now - last_token_).count());
    tokens_seen_ = tokens;
    last_token_ = now;
  }

  void on_finished(const RequestOutput& out) {
    finished_ = true;
    timer_.cancel();
    --shared_->metrics.in_flight;
    // Idle again: hand the burst's freed heap back to the OS (glibc keeps it otherwise, so RSS
    // would stay at the burst's high-water mark).
    if (shared_->metrics.in_flight == 0) malloc_trim(0);
    if (tokens_seen_ > 0) --shared_->metrics.generating;
    shared_->live.erase(id_);
    finish_reason_ = "abort";
    if (!out.outputs.empty() && out.outputs[0].finish_reason)
      finish_reason_ = *out.outputs[0].finish_reason;
    prompt_tokens_ = out.usage.prompt_tokens;
    completion_tokens_ = tokens_seen_;
    shared_->metrics.on_finished(
        finish_reason_ == "stop" || finish_reason_ == "length" ? finish_reason_ : "abort",
        seconds_since(start_), prompt_tokens_, completion_tokens_);
    if (timed_out_) finish_reason_ = "timeout";
  }

  void on_output(const RequestOutput& out) {
    if (finished_) return;
    observe_tokens(out);
    if (out.finished) on_finished(out);
    if (!req_.stream) {
      if (!out.finished) return;
      if (timed_out_) return send_error(timeout_error(shared_->options.request_timeout_s));
      json body;
      if (req_.endpoint == Endpoint::kCompletions) {
        body = completion_response(id_, created_, model_name(), out, token_text());
      } else {
        int64_t reasoning = 0;
        if (req_.thinking)
          for (const CompletionOutput& c : out.outputs)
            reasoning += reasoning_tokens(parse_chat_output(c.text, true).reasoning_content);
        body =
            chat_response(id_, created_, model_name(), out, req_.thinking, reasoning, token_text());
      }
      return send(200, body.dump(-1, ' ', false, json::error_handler_t::replace));
    }
    if (write_failed_) {
      if (out.finished) {
        log_access(200);
        close();
      }
      return;
    }
    stream_outputs(out);
    if (!out.finished) return;
    if (timed_out_)
      enqueue(sse_event(error_body(timeout_error(shared_->options.request_timeout_s))));
    if (req_.include_usage) {
      int64_t reasoning = 0;
      for (const recipe::StreamingParser& p : parsers_)
        reasoning += reasoning_tokens(p.message().reasoning_content);
      enqueue(sse_event(usage_chunk(id_, created_, model_name(), req_.endpoint,
                                    usage_json(out.usage, tokens_seen_, reasoning))));
    }
    enqueue(std::string(kSseDone));
    log_access(200);
    close_after_writes_ = true;
    if (!writing_) close();
  }

  void stream_outputs(const RequestOutput& out) {
    const TokenText text_of = token_text();
    for (const CompletionOutput& c : out.outputs) {
      const size_t i = static_cast<size_t>(c.index);
      // Every update repeats all samples; one that already finished has nothing more to say.
      if (i >= first_chunk_.size() || sample_done_[i]) continue;
      if (c.finish_reason) sample_done_[i] = true;
      // This update's tokens are the last delta_token_ids.size() logprobs entries.
      std::span<const TokenLogprobs> lps;
      if (text_of && c.logprobs.size() >= c.delta_token_ids.size())
        lps = std::span<const TokenLogprobs>(c.logprobs).last(c.delta_token_ids.size());
      if (req_.endpoint == Endpoint::kCompletions) {
        if (c.delta_text.empty() && !c.finish_reason && lps.empty()) continue;
        json lp = lps.empty() ? json() : completion_logprobs(lps, text_of, &text_offset_[i]);
        enqueue(sse_event(completion_chunk(id_, created_, model_name(), c.index, c.delta_text,
                                           c.finish_reason, lp)));
        continue;
      }
      recipe::StreamDelta delta;
      recipe::StreamingParser& parser = parsers_[i];
      parser.feed(c.delta_text, &delta);
      std::optional<std::string> finish = c.finish_reason;
      if (finish) {
        parser.finish(&delta);
        if (!parser.message().tool_calls.empty() && *finish == "stop") finish = "tool_calls";
      }
      if (!delta.empty() || first_chunk_[i] || finish || !lps.empty()) {
        json lp = lps.empty() ? json() : chat_logprobs(lps, text_of);
        enqueue(sse_event(
            chat_chunk(id_, created_, model_name(), c.index, delta, first_chunk_[i], finish, lp)));
        first_chunk_[i] = false;
      }
    }
  }

  void enqueue(std::string data) {
    queue_.push_back(std::move(data));
    if (!writing_) write_next();
  }

  void write_next() {
    if (queue_.empty()) {
      writing_ = false;
      if (close_after_writes_) close();
      return;
    }
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->queue_.pop_front();
                        if (ec) {
                          self->write_failed_ = true;
                          self->writing_ = false;
                          self->queue_.clear();
                          self->cancel();
                          if (self->close_after_writes_) self->close();
                          return;
                        }
                        self->write_next();
                      });
  }

  void log_access(int status) {
    shared_->metrics.on_http_status(status);
    if (!shared_->log) return;
    AccessRecord r;
    r.remote = remote_;
    r.method = method_;
    r.path = path_;
    r.status = status;
    r.duration_s = seconds_since(start_);
    r.request_id = id_;
    if (submitted_) {
      r.stream = req_.stream;
      r.prompt_tokens = prompt_tokens_;
      r.completion_tokens = completion_tokens_;
      r.finish_reason = finish_reason_;
    }
    shared_->log->write(r);
  }

  void send_error(const ApiError& e) { send(e.http_status, error_body(e).dump()); }

  void send(int status, std::string body, const char* content_type = "application/json") {
    log_access(status);
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::content_type, content_type);
    res->set(http::field::server, "deepinfer");
    res->keep_alive(keep_alive_);
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(socket_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->end_exchange();
                        if (!ec && self->linger_) return self->linger_close();
                        if (ec || !self->keep_alive_ || self->shared_->draining)
                          return self->close();
                        self->reset_for_next();
                        self->read_request();
                      });
  }

  void end_exchange() {
    if (!busy_) return;
    busy_ = false;
    --shared_->metrics.busy;
  }

  void reset_for_next() {
    req_ = ParsedRequest{};
    id_.clear();
    parsers_.clear();
    submitted_ = finished_ = cancelled_ = timed_out_ = false;
    tokens_seen_ = prompt_tokens_ = completion_tokens_ = 0;
    finish_reason_.clear();
  }

  // The client may still be sending the body we refused: closing now would reset the connection
  // and could destroy our response before it is read. Half-close, discard input until the
  // client closes too (at most a few seconds), then close.
  void linger_close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    timer_.expires_after(std::chrono::seconds(5));
    timer_.async_wait([self = shared_from_this()](beast::error_code e) {
      if (!e) self->close();
    });
    discard();
  }

  void discard() {
    socket_.async_read_some(asio::buffer(probe_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) {
                                self->timer_.cancel();
                                return self->close();
                              }
                              self->discard();
                            });
  }

  void close() {
    end_exchange();
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  Shared* shared_;
  asio::steady_timer timer_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
  Engine* engine_ = nullptr;

  // The current exchange.
  std::string method_, path_;
  Clock::time_point start_, last_token_;
  ParsedRequest req_;
  std::string id_;
  int64_t created_ = now_s();
  std::vector<recipe::StreamingParser> parsers_;  // chat streams: one per sample
  std::vector<bool> first_chunk_, sample_done_;
  std::vector<int64_t> text_offset_;  // completion streams: logprobs text_offset per sample
  int64_t tokens_seen_ = 0, prompt_tokens_ = 0, completion_tokens_ = 0;
  std::string finish_reason_;
  bool busy_ = false, streaming_ = false, submitted_ = false, finished_ = false;
  bool cancelled_ = false, timed_out_ = false, linger_ = false;
  bool writing_ = false, write_failed_ = false, close_after_writes_ = false;
  std::deque<std::string> queue_;
  char probe_[4096];  // disconnect probe and discard buffer
};

class BeastServer final : public HttpServer {
 public:
  BeastServer() : acceptor_(ioc_), drain_timer_(ioc_) {}

  Status listen(const ServerOptions& options) {
    shared_.options = options;
    ASSIGN_OR_RETURN(shared_.log, AccessLog::open(options.access_log));
    beast::error_code ec;
    auto addr = asio::ip::make_address(options.host, ec);
    if (ec) return invalid_argument("--host: '" + options.host + "' is not an IP address");
    tcp::endpoint ep(addr, options.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return failed_precondition("cannot listen on " + options.host + ":" +
                                 std::to_string(options.port) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    return ok_status();
  }

  void set_engine(Engine* engine) override { shared_.engine.store(engine); }

  void run() override {
    accept();
    ioc_.run();
  }

  void stop() override { ioc_.stop(); }

  void shutdown(double grace_s) override {
    asio::post(ioc_, [this, grace_s] {
      if (shared_.draining) return;
      shared_.draining = true;
      beast::error_code ec;
      acceptor_.close(ec);
      drain_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(grace_s));
      poll_drain();
    });
  }

  uint16_t port() const override { return port_; }

 private:
  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<Session>(std::move(socket), &shared_)->start();
      if (acceptor_.is_open()) accept();
    });
  }

  // Done once no response is in progress; past the grace period the rest are cancelled, and
  // their abort events get a short while to be written.
  void poll_drain() {
    const auto now = Clock::now();
    if (shared_.metrics.busy == 0 && shared_.metrics.in_flight == 0) return ioc_.stop();
    if (now >= drain_deadline_) {
      if (cancelled_all_) return ioc_.stop();
      cancelled_all_ = true;
      for (auto& [id, weak] : shared_.live)
        if (auto s = weak.lock()) s->cancel();
      drain_deadline_ = now + std::chrono::seconds(2);
    }
    drain_timer_.expires_after(std::chrono::milliseconds(20));
    drain_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) poll_drain();
    });
  }

  asio::io_context ioc_{1};
  tcp::acceptor acceptor_;
  asio::steady_timer drain_timer_;
  Clock::time_point drain_deadline_;
  bool cancelled_all_ = false;
  uint16_t port_ = 0;
  Shared shared_;
};

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::create(const ServerOptions& options) {
  try {
    auto server = std::make_unique<BeastServer>();
    Status st = server->listen(options);
    if (!st.ok()) return st;
    return std::unique_ptr<HttpServer>(std::move(server));
  } catch (const std::exception& e) {
    return internal_error(std::string("server setup: ") + e.what());
  }
}

}  // namespace deepinfer::server
