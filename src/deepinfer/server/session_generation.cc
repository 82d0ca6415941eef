// The engine side of a session: a generation request is parsed and tokenized on the prep pool
// (never on the io thread: a 7 MB prompt or a grammar compile would stall every connection),
// admitted, submitted (one engine request per prompt), and answered as one JSON body or as SSE.
#include <malloc.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "deepinfer/server/random_id.h"
#include "deepinfer/server/session.h"

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using nlohmann::json;

ApiError timeout_error(double s) {
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%g", s);
  return {408, std::string("request timed out after ") + secs + " s (--request-timeout)",
          "timeout_error", "", "request_timeout"};
}

// OpenAI's chat default is "up to the context length" (vLLM: max_model_len - prompt), not
// the completions API's 16; it needs the prompt's length as submit will tokenize it.
void default_max_tokens(const Engine& engine, int64_t max_model_len, ParsedRequest* req) {
  auto ids = engine.prompt_token_ids(req->gen);
  if (!ids.ok()) return;  // submit reports the error
  // Bounded by the KV pool too: a length the pool cannot hold would be a 400.
  const int64_t limit = std::min(max_model_len, engine.capacity().max_tokens + 1);
  const int64_t room = limit - static_cast<int64_t>(ids->size());
  if (room > 0) req->gen.params.max_tokens = static_cast<int>(std::min<int64_t>(room, INT32_MAX));
  // Submit the ids, so the engine does not encode and tokenize the chat a second time.
  req->gen.prompt_ids = std::move(*ids);
  req->gen.chat.reset();
}

// Runs on the prep pool: everything CPU-heavy before the engine sees the request.
std::optional<ApiError> prepare(Endpoint endpoint, const std::string& body, const Engine& engine,
                                const ServerOptions& options, ParsedRequest* req,
                                std::vector<std::string>* prompt_texts) {
  ApiError err;
  if (!parse_request(endpoint, body, engine.vocab_size(), engine.chat_variant(), req, &err))
    return err;
  const auto& names = options.model_names;
  if (!req->model.empty() && std::find(names.begin(), names.end(), req->model) == names.end())
    return model_not_found_error(req->model);
  if (endpoint == Endpoint::kChatCompletions && !req->max_tokens_given)
    default_max_tokens(engine, options.max_model_len, req);
  if (req->echo) {
    for (const PromptInput& p : req->prompts) {
      if (!p.is_ids) {
        prompt_texts->push_back(p.text);
        continue;
      }
      auto text = engine.detokenize(p.ids);
      prompt_texts->push_back(text.ok() ? *text : std::string());
    }
  }
  return std::nullopt;
}

}  // namespace

void Session::start_generation(Endpoint endpoint) {
  generating_ = true;
  watch_peer();  // a client that leaves while its request is prepared or runs cancels it
  auto body = std::make_shared<std::string>(std::move(parser_->get().body()));
  // The prefix cache's retention may come as a header instead of the body field.
  std::string retention(parser_->get()["X-Cache-Retention"]);
  asio::post(
      *state_->prep, [self = shared_from_this(), endpoint, body, retention, engine = engine_] {
        auto req = std::make_shared<ParsedRequest>();
        auto texts = std::make_shared<std::vector<std::string>>();
        std::optional<ApiError> error;
        try {
          error = prepare(endpoint, *body, *engine, self->state_->options, req.get(), texts.get());
          if (!error && !retention.empty()) {
            if (const std::optional<CacheRetention> r = parse_cache_retention(retention)) {
              req->gen.cache_retention = *r;
            } else {
              error = ApiError{
                  400, "X-Cache-Retention must be agent, chat or none, got \"" + retention + "\"",
                  "invalid_request_error", "X-Cache-Retention", "invalid_value"};
            }
          }
        } catch (const std::exception& e) {
          error = ApiError{500, std::string("internal error: ") + e.what(), "internal_error", "",
                           "internal_error"};
        }
        asio::post(*self->state_->ioc, [self, req, texts, error] {
          self->guarded([&] {
            self->prompt_texts_ = std::move(*texts);
            self->on_prepared(req, error);
          });
        });
      });
}

// Waiting = admitted but not yet running. The running slots are the engine's --max-num-seqs
// (or fewer when the KV pool holds fewer sequences); every prompt of a request is one engine
// request. So --max-waiting-requests N admits up to slots + N unfinished engine requests.
bool Session::admit(size_t prompts) {
  const int64_t limit = state_->options.max_waiting_requests;
  if (limit < 0) return true;
  const int64_t slots = std::max<int64_t>(
      1, std::min(state_->options.max_running, engine_->capacity().max_sequences));
  return state_->metrics.in_flight + static_cast<int64_t>(prompts) <= slots + limit;
}

void Session::on_prepared(std::shared_ptr<ParsedRequest> req, std::optional<ApiError> error) {
  if (closed_) return;
  if (peer_gone_ || cancelled_) return close();  // nobody to answer
  if (error) {
    generating_ = false;
    return send_error(*error);
  }
  if (disagg_prepared(req)) return;
  req_ = std::move(req);
  const bool chat = req_->endpoint == Endpoint::kChatCompletions;
  const size_t prompts = chat ? 1 : std::max<size_t>(1, req_->prompts.size());
  if (state_->draining) {
    generating_ = false;
    return send_error({503, "the server is shutting down", "server_error", "", "shutting_down"});
  }
  if (!admit(prompts)) {
    generating_ = false;
    return send_error({429,
                       "too many requests are waiting (--max-waiting-requests " +
                           std::to_string(state_->options.max_waiting_requests) + ")",
                       "rate_limit_error", "", "overloaded"},
                      {{"Retry-After", "1"}});
  }
  id_ = random_id(chat ? "chatcmpl-" : "cmpl-");
  const size_t n = static_cast<size_t>(std::max(1, req_->gen.params.n));
  const size_t choices = prompts * n;
  engine_ids_.clear();
  for (size_t p = 0; p < prompts; ++p)
    engine_ids_.push_back(prompts == 1 ? id_ : id_ + "-" + std::to_string(p));
  outputs_.assign(prompts, RequestOutput{});
  prompt_done_.assign(prompts, false);
  tokens_per_prompt_.assign(prompts, 0);
  prompts_done_ = 0;
  if (req_->stream && chat)
    parsers_.assign(choices,
                    recipe::StreamingParser(req_->thinking, req_->variant, req_->parse_tool_calls));
  first_chunk_.assign(choices, true);
  sample_done_.assign(choices, false);
  text_offset_.assign(choices, 0);
  if (req_->echo)
    for (size_t c = 0; c < choices; ++c) text_offset_[c] = count_chars(prompt_texts_[c / n]);
  admitted_ = true;
  state_->metrics.in_flight += static_cast<int64_t>(prompts);
  auto self = shared_from_this();
  for (const std::string& id : engine_ids_) state_->live[id] = self;
  if (state_->options.request_timeout_s > 0) {
    request_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(state_->options.request_timeout_s)));
    request_timer_.async_wait([self](beast::error_code ec) {
      if (ec || !self->generating_) return;
      self->timed_out_ = true;
      self->cancel();
    });
  }
  if (req_->stream) start_stream();
  // Submitting tokenizes the prompt and compiles any grammar: the prep pool's work too.
  for (size_t p = 0; p < prompts; ++p) {
    GenerateRequest g = chat ? req_->gen : request_for_prompt(*req_, p);
    g.request_id = engine_ids_[p];
    asio::post(*state_->prep, [self, p, g = std::move(g), engine = engine_]() mutable {
      auto* ioc = self->state_->ioc;
      Status st = engine->submit(std::move(g), [self, p, ioc](const RequestOutput& out) {
        // Engine thread: hand a copy to the io thread, which owns the session.
        asio::post(*ioc, [self, p, out] { self->guarded([&] { self->on_output(p, out); }); });
      });
      asio::post(*ioc, [self, p, st] { self->guarded([&] { self->on_submitted(p, st); }); });
    });
  }
}

void Session::on_submitted(size_t p, Status st) {
  if (st.ok()) {
    if (cancelled_) engine_->cancel(engine_ids_[p]);
    return;
  }
  // Refused before any work: that prompt is finished; a batch's other prompts are cancelled,
  // since the response is this error.
  if (failure_.ok()) failure_ = st;
  if (prompt_done_[p]) return;
  prompt_done_[p] = true;
  ++prompts_done_;
  --state_->metrics.in_flight;
  state_->live.erase(engine_ids_[p]);
  cancel();
  if (prompts_done_ == prompt_done_.size()) on_all_finished();
}

void Session::cancel() {
  if (!admitted_) {
    cancelled_ = true;
    return;
  }
  cancelled_ = true;  // prompts submitted later are cancelled in on_submitted
  for (size_t p = 0; p < prompt_done_.size(); ++p)
    if (!prompt_done_[p]) engine_->cancel(engine_ids_[p]);
}

// TTFT from the first update carrying tokens, ITL between later ones (vLLM's definitions).
void Session::observe_tokens(size_t p, const RequestOutput& out) {
  int64_t tokens = 0;
  for (const CompletionOutput& c : out.outputs) tokens += static_cast<int64_t>(c.token_ids.size());
  if (tokens <= tokens_per_prompt_[p]) return;
  auto now = Clock::now();
  if (tokens_per_prompt_[p] == 0) {
    state_->metrics.on_first_token(std::chrono::duration<double>(now - start_).count());
    ++state_->metrics.generating;
  } else {
    state_->metrics.on_inter_token(std::chrono::duration<double>(now - last_token_).count());
  }
  tokens_seen_ += tokens - tokens_per_prompt_[p];
  tokens_per_prompt_[p] = tokens;
  last_token_ = now;
}

void Session::on_output(size_t p, const RequestOutput& out) {
  if (p >= prompt_done_.size() || prompt_done_[p]) return;
  observe_tokens(p, out);
  outputs_[p] = out;
  if (out.finished) {
    prompt_done_[p] = true;
    ++prompts_done_;
    --state_->metrics.in_flight;
    if (tokens_per_prompt_[p] > 0) --state_->metrics.generating;
    state_->live.erase(engine_ids_[p]);
    std::string reason = "abort";
    if (!out.outputs.empty() && out.outputs[0].finish_reason)
      reason = *out.outputs[0].finish_reason;
    if (p == 0) finish_reason_ = reason;
    prompt_tokens_ += out.usage.prompt_tokens;
    state_->metrics.on_finished(reason == "stop" || reason == "length" ? reason : "abort",
                                std::chrono::duration<double>(Clock::now() - start_).count(),
                                out.usage.prompt_tokens, tokens_per_prompt_[p]);
    if (!out.status.ok() && failure_.ok()) failure_ = out.status;
  }
  if (req_->stream && !write_failed_) stream_outputs(p, out);
  if (prompts_done_ == prompt_done_.size()) on_all_finished();
}

void Session::on_all_finished() {
  generating_ = false;
  request_timer_.cancel();
  // Idle again: hand the burst's freed heap back to the OS (glibc keeps it otherwise, so RSS
  // would stay at the burst's high-water mark).
  if (state_->metrics.in_flight == 0) malloc_trim(0);
  if (timed_out_) finish_reason_ = "timeout";
  const std::optional<ApiError> error =
      timed_out_       ? std::optional<ApiError>(timeout_error(state_->options.request_timeout_s))
      : !failure_.ok() ? std::optional<ApiError>(error_from_status(failure_, *req_))
                       : std::nullopt;
  if (disagg_finished(error)) return;
  if (!req_->stream) {
    if (peer_gone_) {
      log_access(499);  // nginx's "client closed request": nobody is left to answer
      return close();
    }
    if (error) return send_error(*error);
    const size_t n = static_cast<size_t>(std::max(1, req_->gen.params.n));
    if (req_->endpoint == Endpoint::kCompletions)
      return send_json(200, completion_response(id_, created_, model_name(), outputs_,
                                                static_cast<int>(n), prompt_texts_, token_text()));
    int64_t reasoning = 0;
    if (req_->thinking)
      for (const CompletionOutput& c : outputs_[0].outputs)
        reasoning +=
            reasoning_tokens(parse_chat_output(c.text, true, req_->variant, req_->parse_tool_calls)
                                 .reasoning_content);
    return send_json(
        200, chat_response(id_, created_, model_name(), outputs_[0], req_->thinking, reasoning,
                           req_->variant, token_text(), req_->parse_tool_calls));
  }
  if (write_failed_) {
    log_access(200);
    return close();
  }
  if (error) {
    enqueue(sse_event(error_body(*error)));
  } else if (malformed_output_) {
    enqueue(sse_event(error_body(ApiError{500,
                                          "the model's output does not follow the chat format (" +
                                              *malformed_output_ +
                                              "); what was streamed is a lenient reading of it",
                                          "server_error", "", "malformed_model_output"})));
  }
  if (req_->include_usage) {
    int64_t reasoning = 0;
    for (const recipe::StreamingParser& parser : parsers_)
      reasoning += reasoning_tokens(parser.message().reasoning_content);
    Usage total;
    for (const RequestOutput& o : outputs_) {
      total.prompt_tokens += o.usage.prompt_tokens;
      total.cached_tokens += o.usage.cached_tokens;
      total.accepted_prediction_tokens += o.usage.accepted_prediction_tokens;
    }
    enqueue(sse_event(usage_chunk(id_, created_, model_name(), req_->endpoint,
                                  usage_json(total, tokens_seen_, reasoning))));
  }
  enqueue(std::string(kSseDone));
  log_access(200);
  close_after_writes_ = true;
  if (!writing_) close();
}

void Session::start_stream() {
  streaming_ = true;
  response_started_ = true;
  enqueue(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Connection: close\r\n\r\n");
}

void Session::stream_outputs(size_t p, const RequestOutput& out) {
  const TokenText text_of = token_text();
  const size_t n = static_cast<size_t>(std::max(1, req_->gen.params.n));
  for (const CompletionOutput& c : out.outputs) {
    const size_t i = p * n + static_cast<size_t>(c.index);
    // Every update repeats all samples; one that already finished has nothing more to say.
    if (i >= first_chunk_.size() || sample_done_[i]) continue;
    if (c.finish_reason) sample_done_[i] = true;
    // This update's tokens are the last delta_token_ids.size() logprobs entries.
    std::span<const TokenLogprobs> lps;
    if (text_of && c.logprobs.size() >= c.delta_token_ids.size())
      lps = std::span<const TokenLogprobs>(c.logprobs).last(c.delta_token_ids.size());
    if (req_->endpoint == Endpoint::kCompletions) {
      std::string text = c.delta_text;
      if (first_chunk_[i] && req_->echo) text = prompt_texts_[p] + text;
      if (text.empty() && !c.finish_reason && lps.empty()) continue;
      first_chunk_[i] = false;
      json lp = lps.empty() ? json() : completion_logprobs(lps, text_of, &text_offset_[i]);
      enqueue(sse_event(completion_chunk(id_, created_, model_name(), static_cast<int>(i), text,
                                         c.finish_reason, lp)));
      continue;
    }
    recipe::StreamDelta delta;
    recipe::StreamingParser& parser = parsers_[i];
    parser.feed(c.delta_text, &delta);
    std::optional<std::string> finish = c.finish_reason;
    if (finish) {
      parser.finish(&delta, /*eos_in_text=*/false);  // the engine stops on EOS without its text
      // Output cut by max_tokens or a stop string may be incomplete; one the model ended itself
      // must follow the chat format, or the client is told (the lenient reading was streamed).
      if (*finish == "stop" && !c.stop_reason && !parser.malformed().ok() && !malformed_output_)
        malformed_output_ = "choice " + std::to_string(i) + ": " + parser.malformed().message();
      if (!parser.message().tool_calls.empty() && *finish == "stop") finish = "tool_calls";
    }
    if (!delta.empty() || first_chunk_[i] || finish || !lps.empty()) {
      json lp = lps.empty() ? json() : chat_logprobs(lps, text_of);
      enqueue(sse_event(chat_chunk(id_, created_, model_name(), static_cast<int>(i), delta,
                                   first_chunk_[i], finish, lp)));
      first_chunk_[i] = false;
    }
  }
}

void Session::enqueue(std::string data) {
  queue_.push_back(std::move(data));
  if (!writing_) write_next();
}

void Session::write_next() {
  if (closed_) return;
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

void Session::reset_generation() {
  req_.reset();
  id_.clear();
  engine_ids_.clear();
  prompt_texts_.clear();
  outputs_.clear();
  prompt_done_.clear();
  prompts_done_ = 0;
  failure_ = Status();
  parsers_.clear();
  malformed_output_.reset();
  tokens_per_prompt_.clear();
  tokens_seen_ = prompt_tokens_ = 0;
  finish_reason_.clear();
  generating_ = admitted_ = cancelled_ = timed_out_ = false;
}

std::string Session::model_name() const {
  return req_ && !req_->model.empty() ? req_->model : state_->options.primary_model();
}

int64_t Session::reasoning_tokens(const std::string& text) const {
  if (text.empty()) return 0;
  auto ids = engine_->tokenize(text);
  return ids.ok() ? static_cast<int64_t>(ids->size()) : 0;
}

TokenText Session::token_text() const {
  if (!req_ || !req_->gen.params.logprobs) return {};
  const Engine* e = engine_;
  return [e](int32_t id) {
    auto s = e->detokenize({id});
    return s.ok() ? *s : std::string();
  };
}

}  // namespace deepinfer::server
