#include "deepinfer/server/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <optional>

#include "deepinfer/server/protocol.h"

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

std::atomic<uint64_t> g_next_id{1};

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Shared {
  ServerOptions options;
  std::atomic<Engine*> engine{nullptr};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared* shared) : socket_(std::move(socket)), shared_(shared) {}

  void start() { read_request(); }

 private:
  void read_request() {
    parser_.emplace();
    parser_->body_limit(shared_->options.max_body_bytes);
    buffer_.clear();
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      return send_error(body_too_large_error(shared_->options.max_body_bytes));
    }
    if (ec) return close();
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    std::string target(req.target());
    std::string path = target.substr(0, target.find('?'));
    if (path == "/health") {
      bool ready = shared_->engine.load() != nullptr;
      return send(ready ? 200 : 503, ready ? "{\"status\":\"ok\"}" : "{\"status\":\"loading\"}");
    }
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
    if (engine == nullptr)
      return send_error({503, "the model is still loading", "server_error", "", "loading"});
    engine_ = engine;
    ApiError err;
    if (!parse_request(*ep, req.body(), engine->vocab_size(), &req_, &err)) return send_error(err);
    id_ = std::string(*ep == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") +
          std::to_string(g_next_id.fetch_add(1));
    req_.gen.request_id = id_;
    if (req_.stream) parser_stream_.emplace(req_.thinking);
    auto self = shared_from_this();
    auto* ioc = &static_cast<asio::io_context&>(socket_.get_executor().context());
    Status st = engine->submit(req_.gen, [self, ioc](const RequestOutput& out) {
      // Engine thread: hand a copy to the io thread, which owns the session.
      asio::post(*ioc, [self, out]() { self->on_output(out); });
    });
    if (!st.ok()) return send_error(error_from_status(st));
    submitted_ = true;
    if (req_.stream) start_stream();
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

  void cancel() {
    if (submitted_ && !finished_ && !cancelled_) {
      cancelled_ = true;
      engine_->cancel(id_);
    }
  }

  int64_t reasoning_tokens(const std::string& text) const {
    if (text.empty()) return 0;
    auto ids = engine_->tokenize(text);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : 0;
  }

  void on_output(const RequestOutput& out) {
    if (finished_) return;
    if (out.finished) finished_ = true;
    if (!req_.stream) {
      if (!out.finished) return;
      json body;
      if (req_.endpoint == Endpoint::kCompletions) {
        body = completion_response(id_, created_, model_name(), out);
      } else {
        std::string reasoning;
        if (!out.outputs.empty() && req_.thinking)
          reasoning = parse_chat_output(out.outputs[0].text, true).reasoning_content;
        body = chat_response(id_, created_, model_name(), out, req_.thinking,
                             reasoning_tokens(reasoning));
      }
      return send(200, body.dump(-1, ' ', false, json::error_handler_t::replace));
    }
    if (write_failed_) return;
    for (const CompletionOutput& c : out.outputs) {
      if (req_.endpoint == Endpoint::kCompletions) {
        if (!c.delta_text.empty() || c.finish_reason)
          enqueue(sse_event(completion_chunk(id_, created_, model_name(), c.index, c.delta_text,
                                             c.finish_reason)));
        continue;
      }
      recipe::StreamDelta delta;
      parser_stream_->feed(c.delta_text, &delta);
      std::optional<std::string> finish = c.finish_reason;
      if (finish) {
        parser_stream_->finish(&delta);
        if (!parser_stream_->message().tool_calls.empty() && *finish == "stop")
          finish = "tool_calls";
      }
      if (!delta.empty() || first_chunk_ || finish) {
        enqueue(sse_event(
            chat_chunk(id_, created_, model_name(), c.index, delta, first_chunk_, finish)));
        first_chunk_ = false;
      }
    }
    if (!out.finished) return;
    if (req_.include_usage) {
      int64_t completion = 0;
      for (const CompletionOutput& c : out.outputs) completion += c.token_ids.size();
      int64_t reasoning =
          parser_stream_ ? reasoning_tokens(parser_stream_->message().reasoning_content) : 0;
      enqueue(sse_event(usage_chunk(id_, created_, model_name(), req_.endpoint,
                                    usage_json(out.usage, completion, reasoning))));
    }
    enqueue(std::string(kSseDone));
    close_after_writes_ = true;
    if (!writing_) close();
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
                          return;
                        }
                        self->write_next();
                      });
  }

  void send_error(const ApiError& e) { send(e.http_status, error_body(e).dump()); }

  void send(int status, std::string body) {
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::content_type, "application/json");
    res->set(http::field::server, "deepinfer");
    res->keep_alive(keep_alive_);
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(socket_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || !self->keep_alive_) return self->close();
                        self->reset_for_next();
                        self->read_request();
                      });
  }

  void reset_for_next() {
    req_ = ParsedRequest{};
    submitted_ = finished_ = cancelled_ = false;
    created_ = now_s();  // keep-alive: each request gets its own timestamp
  }

  void close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  Shared* shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
  Engine* engine_ = nullptr;
  ParsedRequest req_;
  std::string id_;
  int64_t created_ = now_s();
  std::optional<recipe::StreamingParser> parser_stream_;
  bool streaming_ = false, submitted_ = false, finished_ = false, cancelled_ = false;
  bool first_chunk_ = true, writing_ = false, write_failed_ = false, close_after_writes_ = false;
  std::deque<std::string> queue_;
  char probe_[64];
};

class BeastServer final : public HttpServer {
 public:
  BeastServer() : acceptor_(ioc_) {}

  Status listen(const ServerOptions& options) {
    shared_.options = options;
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
    return ok_status();
  }

  void set_engine(Engine* engine) override { shared_.engine.store(engine); }

  void run() override {
    accept();
    ioc_.run();
  }

  void stop() override { ioc_.stop(); }

  uint16_t port() const override { return acceptor_.local_endpoint().port(); }

 private:
  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<Session>(std::move(socket), &shared_)->start();
      if (acceptor_.is_open()) accept();
    });
  }

  asio::io_context ioc_{1};
  tcp::acceptor acceptor_;
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
