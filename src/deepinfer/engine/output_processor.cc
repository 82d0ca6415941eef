#include "deepinfer/engine/output_processor.h"

#include <algorithm>

namespace deepinfer {

StatusOr<TokenChoice> OutputProcessor::choose(SeqState& s, float* logits) const {
  TokenChoice c;
  const bool constrained = s.constraint && !scripted();
  // A grammar over its work budget ends its own request; the step goes on for the others.
  if (constrained) RETURN_IF_ERROR(s.constraint->apply(logits, vocab_));
  c.result = s.sampler->sample(logits, vocab_, eos_);
  if (scripted()) {
    const size_t i = s.out.token_ids.size();
    c.result.token = i < scripted_.size() ? scripted_[i] : eos_;
  }
  // Only eos is left when the grammar is complete; if min_tokens masked it, end here anyway.
  if (constrained && !s.constraint->accept(c.result.token)) {
    if (s.constraint->budget_exceeded()) return s.constraint->budget_error();
    c.grammar_dead = !s.constraint->can_terminate();
    c.result.token = eos_;
    if (!c.grammar_dead) s.constraint->accept(c.result.token);
  }
  if (constrained) c.grammar_stop = s.constraint->is_terminated() && c.result.token == eos_;
  s.sampler->accept(c.result.token);
  s.tokens.push_back(c.result.token);
  return c;
}

bool OutputProcessor::argmax_suffices(const SeqState& s) const {
  return !scripted() && !s.constraint && s.req->seqs.size() == 1 && s.sampler->argmax_suffices();
}

TokenChoice OutputProcessor::take_argmax(SeqState& s, int32_t token) const {
  TokenChoice c;
  c.result.token = token;
  s.sampler->accept(token);
  s.tokens.push_back(token);
  return c;
}

StatusOr<TokenChoice> OutputProcessor::replay(SeqState& s, const SequenceHandoff& h) const {
  TokenChoice c;
  c.result.token = h.first_token;
  c.result.logprob = h.first_logprob;
  for (const auto& [id, lp] : h.first_top) c.result.top.push_back({id, lp});
  // choose() put eos in place of a token the grammar refused, so the same token replays the
  // same verdict: accepted, or refused with the grammar unable to end (dead).
  if (s.constraint && !scripted()) {
    if (!s.constraint->accept(c.result.token)) {
      if (s.constraint->budget_exceeded()) return s.constraint->budget_error();
      c.grammar_dead = true;
    }
    c.grammar_stop = s.constraint->is_terminated() && c.result.token == eos_;
  }
  s.sampler->accept_external(c.result.token, h.first_drew);
  s.tokens.push_back(c.result.token);
  return c;
}

std::string OutputProcessor::append(SeqState& s, const TokenChoice& c, bool length_reached) const {
  const int32_t token = c.result.token;
  std::string delta;
  if (s.detok) (void)s.detok->push(token, &delta);
  bool done = false;
  std::string reason;
  std::string emit = s.stop->push(token, delta, &done, &reason);
  if (length_reached && !done) {
    done = true;
    reason = "length";
  }
  if ((c.grammar_stop || c.grammar_dead) && !done) {  // ignore_eos cannot outlive the grammar
    done = true;
    reason = c.grammar_dead ? "abort" : "stop";
    if (c.grammar_dead) s.out.stop_reason = "so_args: the grammar allows no token here";
  }
  s.out.token_ids.push_back(token);
  s.out.delta_token_ids.push_back(token);
  if (s.req->req.params.logprobs) {
    TokenLogprobs lp{token, c.result.logprob, {}};
    for (const auto& t : c.result.top) lp.top.emplace_back(t.id, t.logprob);
    s.out.logprobs.push_back(std::move(lp));
  }
  if (done) {
    emit += s.stop->flush();
    // Bytes of a character cut off by max_tokens come out as U+FFFD, never silently dropped.
    if (s.detok && reason == "length") s.detok->finish(&emit);
    if (auto m = s.stop->matched_stop()) s.out.stop_reason = *m;
  }
  s.out.text += emit;
  s.out.delta_text += emit;
  s.req->touched = true;
  return done ? reason : std::string();
}

RequestOutput take_output(RequestState& r) {
  RequestOutput o;
  o.request_id = r.req.request_id;
  o.prompt_token_ids = r.prompt;
  o.finished = r.num_finished == static_cast<int>(r.seqs.size());
  o.status = r.status;
  if (o.finished && r.status.ok()) o.handoff = r.handoff;
  o.usage.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  o.usage.cached_tokens = std::max<int64_t>(0, r.cached_tokens);
  for (auto& s : r.seqs) {
    o.outputs.push_back(s->out);
    o.usage.completion_tokens += static_cast<int64_t>(s->out.token_ids.size());
    o.usage.accepted_prediction_tokens += s->accepted_drafts;
    s->out.delta_text.clear();
    s->out.delta_token_ids.clear();
  }
  r.touched = false;
  return o;
}

}  // namespace deepinfer
