// One client connection of `deepinfer serve`: reads HTTP/1.1 requests in order (pipelined ones
// included), answers each, and runs generation requests against the engine. Everything here
// runs on the io thread; the engine's callbacks and the prep pool post back to it.
//
// session.cc holds the HTTP exchange (timeouts, 100-continue, limits, routes, writes);
// session_generation.cc the engine side (admission, submit, responses and SSE chunks).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/recipe/streaming_parser.h"
#include "deepinfer/server/protocol.h"
#include "deepinfer/server/server_state.h"

namespace deepinfer::server {

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Clock = std::chrono::steady_clock;
  using Headers = std::vector<std::pair<std::string, std::string>>;

  Session(boost::asio::ip::tcp::socket socket, ServerState* state);
  ~Session();
  void start();
  // Aborts the running engine requests (their final events are still sent).
  void cancel();

 private:
  // ---- HTTP exchange (session.cc)
  void next_request();
  void wait_for_bytes();
  void read_header();
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  // The head checks that need no body; false when they answered already.
  bool check_head();
  void handle_request();
  // Runs a handler step; an exception becomes a 500 (or closes a started response).
  void guarded(const std::function<void()>& f);
  void begin_exchange(std::string method, std::string path);
  void end_exchange();
  void send(int status, std::string body, std::string_view content_type = "application/json",
            Headers extra = {});
  void send_json(int status, const nlohmann::json& body, Headers extra = {});
  void send_error(const ApiError& e, Headers extra = {});
  void on_response_written(boost::beast::error_code ec);
  void watch_peer();
  void stop_watching_then(void (Session::*next)());
  void arm_timer(double seconds, void (Session::*on_expiry)());
  void disarm_timer();
  void linger_close();
  void discard();
  void close();
  void log_access(int status);

  // ---- prefill/decode disaggregation (session_disagg.cc)
  // Reads the X-Deepinfer-Disagg/-Handoff headers; false when it answered (an error).
  bool read_disagg_headers();
  // After parsing: false to go on as usual; true when it answered or went to fetch the state
  // (on_prepared runs again once the state is in).
  bool disagg_prepared(const std::shared_ptr<ParsedRequest>& req);
  // The prefill phase's answer (the handoff token); false when this is no prefill phase.
  bool disagg_finished(const std::optional<ApiError>& error);
  void send_load();
  std::string render_disagg_metrics() const;

  // ---- generation (session_generation.cc)
  void start_generation(Endpoint endpoint);
  void on_prepared(std::shared_ptr<ParsedRequest> req, std::optional<ApiError> error);
  void on_submitted(size_t prompt, Status st);
  void on_output(size_t prompt, const RequestOutput& out);
  void on_all_finished();
  void start_stream();
  void stream_outputs(size_t prompt, const RequestOutput& out);
  void enqueue(std::string data);
  void write_next();
  void reset_generation();
  std::string model_name() const;
  bool admit(size_t prompts);
  void observe_tokens(size_t prompt, const RequestOutput& out);
  int64_t reasoning_tokens(const std::string& text) const;
  TokenText token_text() const;

  boost::asio::ip::tcp::socket socket_;
  ServerState* state_;
  boost::asio::steady_timer timer_;          // idle, read and linger deadlines
  boost::asio::steady_timer request_timer_;  // --request-timeout
  uint64_t timer_gen_ = 0;
  std::string remote_;
  boost::beast::flat_buffer buffer_;  // bytes read and not yet parsed (pipelining keeps them)
  std::optional<RequestParser> parser_;
  bool keep_alive_ = false;
  bool watching_ = false;                     // a read that notices the peer leaving
  void (Session::*after_watch_)() = nullptr;  // what to do once that read has ended
  bool peer_gone_ = false;
  bool response_started_ = false;  // status line sent (stream), or a response being written
  bool linger_ = false;
  bool closed_ = false;
  char scratch_[4096];  // discard buffer

  // The current exchange.
  std::string method_, path_;
  Clock::time_point start_, last_token_;
  int64_t created_ = 0;
  bool busy_ = false;
  Engine* engine_ = nullptr;

  // The current generation (one engine request per prompt; completions may batch prompts).
  std::shared_ptr<ParsedRequest> req_;
  std::string id_;                         // the response id
  std::vector<std::string> engine_ids_;    // per prompt
  std::vector<std::string> prompt_texts_;  // per prompt, for echo
  std::vector<RequestOutput> outputs_;     // per prompt, latest
  std::vector<bool> prompt_done_;
  size_t prompts_done_ = 0;
  Status failure_;                                // the first error a running request ended on
  std::vector<recipe::StreamingParser> parsers_;  // chat streams: one per choice
  // Chat streams: the first choice that ended on EOS with output the chat format rejects (the
  // stream then ends with an error event, after what was streamed).
  std::optional<std::string> malformed_output_;
  std::vector<bool> first_chunk_, sample_done_;
  std::vector<int64_t> text_offset_;  // completion streams: logprobs text_offset per choice
  std::vector<int64_t> tokens_per_prompt_;
  int64_t tokens_seen_ = 0, prompt_tokens_ = 0;
  std::string finish_reason_;
  bool generating_ = false, admitted_ = false, cancelled_ = false, timed_out_ = false;
  bool streaming_ = false, writing_ = false, write_failed_ = false, close_after_writes_ = false;
  std::deque<std::string> queue_;
  enum class DisaggPhase { kNone, kPrefill, kDecode };
  DisaggPhase disagg_ = DisaggPhase::kNone;
  std::string handoff_token_;  // the decode phase's X-Deepinfer-Handoff
};

}  // namespace deepinfer::server
