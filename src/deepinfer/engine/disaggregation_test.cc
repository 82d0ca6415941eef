// Prefill/decode disaggregation at the engine (issue 20): a request whose prompt and first token
// run on one engine (export_state) and whose decoding runs on another (import_state), with the
// state passed through its serialized form, gives bit for bit the tokens and logprobs of the same
// request on one engine: greedy, seeded, seq_seed, penalties, logprobs, a grammar; prompts ending
// inside, at and past a page; V4 and V4.1; and imported sequences that get preempted. The
// expected outputs are the single engine's, never the code under test's own figures.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_test_util.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"

namespace deepinfer {
namespace {

const std::string& v4_model() {
  static const std::string dir = v4::quantized_tiny_model_for_test("disagg_model", 20);
  return dir;
}

std::unique_ptr<Engine> make_engine(const std::string& model, int64_t budget = 512,
                                    int64_t kv_bytes = int64_t{256} << 20,
                                    const std::string& salt = "") {
  EngineArgs a;
  a.model = model;
  a.max_num_batched_tokens = budget;
  a.max_num_seqs = 16;
  a.kv_memory_bytes = kv_bytes;
  a.kv_cache_salt = salt;
  auto e = Engine::create(a);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, size_t n) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % 128000);
  return ids;
}

// The state as disagg/ ships it: its JSON header and its pages, parsed back.
std::shared_ptr<const SequenceHandoff> shipped(const SequenceHandoff& h) {
  auto back = handoff_from_meta(handoff_meta(h), h.pages);
  EXPECT_TRUE(back.ok()) << back.status().to_string();
  return back.ok() ? std::make_shared<SequenceHandoff>(std::move(*back)) : nullptr;
}

StatusOr<std::shared_ptr<const SequenceHandoff>> prefill(Engine& p, GenerateRequest r) {
  r.export_state = true;
  ASSIGN_OR_RETURN(RequestOutput out, p.generate(std::move(r)));
  if (!out.status.ok()) return out.status;
  if (!out.handoff) return internal_error("export_state finished without a handoff");
  EXPECT_EQ(out.outputs.at(0).token_ids.size(), 1u);
  EXPECT_EQ(out.outputs.at(0).token_ids[0], out.handoff->first_token);
  return shipped(*out.handoff);
}

void expect_same_output(const RequestOutput& got, const RequestOutput& want,
                        const std::string& what) {
  ASSERT_TRUE(got.status.ok()) << what << ": " << got.status.to_string();
  ASSERT_EQ(got.outputs.size(), 1u) << what;
  const CompletionOutput& g = got.outputs[0];
  const CompletionOutput& w = want.outputs[0];
  EXPECT_EQ(g.token_ids, w.token_ids) << what;
  EXPECT_EQ(g.text, w.text) << what;
  EXPECT_EQ(g.finish_reason, w.finish_reason) << what;
  EXPECT_EQ(got.usage.prompt_tokens, want.usage.prompt_tokens) << what;
  EXPECT_EQ(got.usage.completion_tokens, want.usage.completion_tokens) << what;
  ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << what;
  for (size_t i = 0; i < g.logprobs.size(); ++i) {
    EXPECT_EQ(g.logprobs[i].token, w.logprobs[i].token) << what << " at " << i;
    EXPECT_EQ(g.logprobs[i].logprob, w.logprobs[i].logprob) << what << " at " << i;
    EXPECT_EQ(g.logprobs[i].top, w.logprobs[i].top) << what << " at " << i;
  }
}

// The request kinds a decode worker must continue exactly.
std::vector<std::pair<std::string, GenerateRequest>> request_kinds(std::mt19937_64& rng) {
  std::vector<std::pair<std::string, GenerateRequest>> out;
  // Prompt lengths inside the first page, one short of it, on it, past it, two pages and a tail.
  for (size_t len : {5, 127, 128, 129, 300}) {
    GenerateRequest greedy;
    greedy.prompt_ids = random_ids(rng, len);
    greedy.params.temperature = 0.0f;
    greedy.params.max_tokens = 12;
    greedy.params.ignore_eos = true;
    out.emplace_back("greedy, prompt " + std::to_string(len), greedy);

    GenerateRequest seeded = greedy;
    seeded.params.temperature = 0.9f;
    seeded.params.top_p = 0.9f;
    seeded.params.seed = 1000 + len;
    seeded.params.logprobs = 3;
    out.emplace_back("seed + logprobs, prompt " + std::to_string(len), seeded);
  }
  GenerateRequest keyed;
  keyed.prompt_ids = random_ids(rng, 140);
  keyed.params.temperature = 1.0f;
  keyed.params.seq_seed = 77;
  keyed.params.max_tokens = 10;
  keyed.params.ignore_eos = true;
  out.emplace_back("seq_seed", keyed);

  GenerateRequest penalized = keyed;
  penalized.params.seq_seed.reset();
  penalized.params.seed = 5;
  penalized.params.repetition_penalty = 1.3f;
  penalized.params.frequency_penalty = 0.5f;
  penalized.params.presence_penalty = 0.25f;
  penalized.params.min_tokens = 4;
  penalized.params.ignore_eos = false;
  out.emplace_back("penalties + min_tokens", penalized);
  return out;
}

void expect_disaggregation_matches(const std::string& model, uint64_t seed) {
  auto one = make_engine(model);
  auto p = make_engine(model);
  auto d = make_engine(model);
  ASSERT_TRUE(one && p && d);
  std::mt19937_64 rng(seed);
  for (auto& [what, r] : request_kinds(rng)) {
    auto want = one->generate(r);
    ASSERT_TRUE(want.ok()) << what << ": " << want.status().to_string();
    auto h = prefill(*p, r);
    ASSERT_TRUE(h.ok()) << what << ": " << h.status().to_string();
    GenerateRequest dr = r;
    dr.import_state = *h;
    auto got = d->generate(dr);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
    expect_same_output(*got, *want, what);
  }
}

TEST(Disaggregation, ExportThenImportGivesOneEnginesTokensV4) {
  expect_disaggregation_matches(v4_model(), 1);
}

TEST(Disaggregation, ExportThenImportGivesOneEnginesTokensV41) {
  expect_disaggregation_matches(v41::tiny_model_dir_for_test(/*quantized=*/true), 2);
}

TEST(Disaggregation, GrammarContinuesFromTheImportedFirstToken) {
  auto one = make_engine(v4_model());
  auto p = make_engine(v4_model());
  auto d = make_engine(v4_model());
  ASSERT_TRUE(one && p && d);
  for (uint64_t seed : {1, 2, 3}) {
    GenerateRequest r;
    r.prompt = "The answer is";
    r.params.max_tokens = 48;
    r.params.temperature = 0.8f;
    r.params.seed = seed;
    r.params.so_args = sample::StructuredOutput{sample::StructuredOutput::Kind::kRegex,
                                                "(yes|no|maybe) [a-z]{1,8}"};
    auto want = one->generate(r);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    auto h = prefill(*p, r);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    r.import_state = *h;
    auto got = d->generate(r);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    expect_same_output(*got, *want, "regex, seed " + std::to_string(seed));
  }
}

// Many imports into a pool that holds only a few sequences: they wait for room, get preempted
// and recompute, and still give one engine's tokens; the prefill's cache hit is reported.
TEST(Disaggregation, ImportsIntoATinyPoolWaitAndSurvivePreemption) {
  auto one = make_engine(v4_model());
  auto p = make_engine(v4_model());
  ASSERT_TRUE(one && p);
  std::mt19937_64 rng(3);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    GenerateRequest r;
    // Prompts end inside their first page and decoding crosses into a second one: imports fill
    // the pool, then growing sequences preempt each other.
    r.prompt_ids = random_ids(rng, 100 + rng() % 28);
    r.params.max_tokens = 30 + static_cast<int>(rng() % 34);
    r.params.ignore_eos = true;
    r.params.temperature = 0.0f;
    if (i % 2) {
      r.params.temperature = 1.0f;
      r.params.seed = 50 + i;
    }
    reqs.push_back(r);
  }
  const std::vector<RequestOutput> want = testing::run_batch(*one, reqs);
  // Three imports (one page of tokens each) fill the pool but for one page: two of them cannot
  // both grow into a second page.
  const EngineCapacity cap = one->capacity();
  auto first = prefill(*p, reqs[0]);
  ASSERT_TRUE(first.ok());
  const int64_t per_seq = (*first)->constant_pages + 2;
  auto d = make_engine(v4_model(), 64, (3 * per_seq - 2) * cap.page_bytes);
  ASSERT_TRUE(d);
  std::vector<GenerateRequest> imports = reqs;
  for (GenerateRequest& r : imports) {
    auto h = prefill(*p, r);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    r.import_state = *h;
  }
  const std::vector<RequestOutput> got = testing::run_batch(*d, imports);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same_output(got[i], want[i], "request " + std::to_string(i));
  EXPECT_GT(d->stats().preemptions, 0) << "the pool was meant to force preemptions";
  for (int i = 0; i < 2000 && d->kv_free_pages() != d->capacity().num_pages; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the step loop's last update
  EXPECT_EQ(d->kv_free_pages(), d->capacity().num_pages) << "imports left pages behind";

  // A repeated prompt hits the prefill's prefix cache; the decode side reports that hit.
  GenerateRequest r;
  r.prompt_ids = random_ids(rng, 200);
  r.params.temperature = 0.0f;
  r.params.max_tokens = 8;
  auto alone = one->generate(r);
  ASSERT_TRUE(alone.ok());
  ASSERT_TRUE(prefill(*p, r).ok());
  auto again = prefill(*p, r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->cached_tokens, 128);  // the prompt's one whole unit
  r.import_state = *again;
  auto out = d->generate(r);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->usage.cached_tokens, 128);
  expect_same_output(*out, *alone, "repeat");
}

void expect_refused(Engine& e, GenerateRequest r, const std::string& needle) {
  Status st = e.submit(std::move(r), [](const RequestOutput&) {});
  EXPECT_FALSE(st.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

TEST(Disaggregation, RefusesAStateItCannotContinue) {
  auto p = make_engine(v4_model());
  auto d = make_engine(v4_model());
  auto salted = make_engine(v4_model(), 512, int64_t{256} << 20, "another checkpoint");
  ASSERT_TRUE(p && d && salted);
  std::mt19937_64 rng(4);
  GenerateRequest r;
  r.prompt_ids = random_ids(rng, 40);
  r.params.temperature = 0.0f;
  r.params.max_tokens = 4;
  auto h = prefill(*p, r);
  ASSERT_TRUE(h.ok());

  GenerateRequest other = r;
  other.import_state = *h;
  expect_refused(*salted, other, "fingerprint");
  other.prompt_ids.back() += 1;
  expect_refused(*d, other, "differs from the prompt of the state");
  other = r;
  other.import_state = *h;
  other.params.n = 2;
  expect_refused(*d, other, "n = 1");
  other.params.n = 1;
  other.export_state = true;
  expect_refused(*d, other, "exclude each other");
  auto cut = std::make_shared<SequenceHandoff>(**h);
  cut->pages.resize(cut->pages.size() - 1);
  other.export_state = false;
  other.import_state = cut;
  expect_refused(*d, other, "page layout");
  auto bad_token = std::make_shared<SequenceHandoff>(**h);
  bad_token->first_token = -3;
  other.import_state = bad_token;
  expect_refused(*d, other, "outside the vocabulary");

  // A malformed header or pages of the wrong length never become a state.
  EXPECT_FALSE(handoff_from_meta("{\"version\": 2}", "").ok());
  EXPECT_FALSE(handoff_from_meta("not json", "").ok());
  auto short_pages = handoff_from_meta(handoff_meta(**h), (*h)->pages.substr(1));
  ASSERT_FALSE(short_pages.ok());
  EXPECT_NE(short_pages.status().message().find("expected"), std::string::npos);
}

// CUDA IPC handoffs (--disagg-cuda-ipc): the header carries the handle and no pages. A CPU
// engine cannot export one (the request ends naming --device cuda) nor map one; an import whose
// state was never mapped into this process is refused instead of reading nothing. (The device
// to device path itself runs on the GPU machine: scripts/gpu_pd_check.sh.)
TEST(Disaggregation, CudaIpcStatesAreRefusedWithoutADevice) {
  auto p = make_engine(v4_model());
  auto d = make_engine(v4_model());
  ASSERT_TRUE(p && d);
  std::mt19937_64 rng(5);
  GenerateRequest r;
  r.prompt_ids = random_ids(rng, 30);
  r.params.temperature = 0.0f;
  r.params.max_tokens = 3;
  GenerateRequest ipc = r;
  ipc.export_ipc = true;
  expect_refused(*p, ipc, "export_ipc is a form of export_state");
  ipc.export_state = true;
  auto out = p->generate(ipc);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_FALSE(out->status.ok());
  EXPECT_NE(out->status.message().find("--device cuda"), std::string::npos)
      << out->status.to_string();

  auto h = prefill(*p, r);
  ASSERT_TRUE(h.ok());
  SequenceHandoff as_ipc = **h;
  as_ipc.pages.clear();
  as_ipc.ipc_handle = std::string("\x00\x7f\xff\x10", 4);
  auto back = handoff_from_meta(handoff_meta(as_ipc), "");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->ipc_handle, as_ipc.ipc_handle);
  EXPECT_EQ(back->state_bytes(), (*h)->state_bytes());
  EXPECT_FALSE(handoff_from_meta(handoff_meta(as_ipc), "x").ok());  // IPC: no pages travel
  const Status mapped = d->map_ipc_state(&*back);
  EXPECT_FALSE(mapped.ok());
  EXPECT_NE(mapped.message().find("--device cuda"), std::string::npos) << mapped.to_string();
  GenerateRequest imported = r;
  imported.import_state = std::make_shared<SequenceHandoff>(std::move(*back));
  auto got = d->generate(imported);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_FALSE(got->status.ok());
  EXPECT_NE(got->status.message().find("not mapped"), std::string::npos) << got->status.to_string();
}

}  // namespace
}  // namespace deepinfer
