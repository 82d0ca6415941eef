// deepinfer serve end to end with npm's official `openai` client: every response is read through
// the client's types and its fields are checked at runtime too. DeepSeek's extensions
// (reasoning_content, prompt_cache_*_tokens) are not in those types, so they are read through
// narrow type guards, never `any`.
// Usage: node dist/openai_e2e.js path/to/deepinfer TMPDIR
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import OpenAI, { APIError } from "openai";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import type { Completion, CompletionUsage } from "openai/resources/completions";
import {
  check,
  CheckError,
  eq,
  isInt,
  isRecord,
  metric,
  metrics,
  Server,
  startServer,
  stopServer,
  waitFor,
} from "./harness.js";

const bin = process.argv[2];
if (bin === undefined) throw new Error("usage: openai_e2e.js path/to/deepinfer [tmpdir]");
const tmp = mkdtempSync(join(process.argv[3] ?? "/tmp", "deepinfer-e2e-"));
const KEY = "e2e-key";

// The scripted completion (serve --debug-scripted-output): reasoning, content, one DSML call, in
// DeepSeek-V4's format: the embedded default model is deepseek_v4, and the server parses output
// in its model's format (Engine::chat_variant).
const SCRIPT =
  "Let me check the weather.</think>Checking now.\n\n<｜DSML｜tool_calls>\n" +
  '<｜DSML｜invoke name="get_weather">\n' +
  '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n' +
  '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n' +
  "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

const WEATHER_TOOL: ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "weather forecast",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};

function hasReasoning(v: unknown): v is { reasoning_content: string } {
  return isRecord(v) && typeof v["reasoning_content"] === "string";
}

interface DeepSeekUsage {
  prompt_cache_hit_tokens: number;
  prompt_cache_miss_tokens: number;
}
function hasCacheUsage(u: unknown): u is DeepSeekUsage {
  return isRecord(u) && isInt(u["prompt_cache_hit_tokens"]) && isInt(u["prompt_cache_miss_tokens"]);
}

// Every usage field, with its arithmetic.
function checkUsage(u: CompletionUsage | undefined | null,
  maxCompletion: number): CompletionUsage & DeepSeekUsage {
  check(u !== undefined && u !== null, "usage missing");
  check(isInt(u.prompt_tokens) && u.prompt_tokens > 0, "usage.prompt_tokens");
  check(isInt(u.completion_tokens) && u.completion_tokens >= 1, "usage.completion_tokens");
  check(u.completion_tokens <= maxCompletion, `completion_tokens ${u.completion_tokens} > max`);
  eq(u.total_tokens, u.prompt_tokens + u.completion_tokens, "usage.total_tokens");
  // The prefix cache works in whole 128-token blocks and always leaves a token to compute.
  const cached = u.prompt_tokens_details?.cached_tokens;
  check(isInt(cached) && cached >= 0 && cached % 128 === 0 && cached < u.prompt_tokens,
    `usage.prompt_tokens_details.cached_tokens ${cached} (prompt ${u.prompt_tokens})`);
  const r = u.completion_tokens_details?.reasoning_tokens;
  check(isInt(r) && r >= 0 && r <= u.completion_tokens, "completion_tokens_details.reasoning_tokens");
  check(hasCacheUsage(u), "prompt_cache_hit_tokens / prompt_cache_miss_tokens missing");
  eq(u.prompt_cache_hit_tokens, cached, "prompt_cache_hit_tokens = cached_tokens");
  eq(u.prompt_cache_miss_tokens, u.prompt_tokens - cached!, "prompt_cache_miss_tokens");
  return u as CompletionUsage & DeepSeekUsage;
}

const FINISH = new Set(["stop", "length", "tool_calls"]);

function checkChat(r: ChatCompletion, n: number, maxTokens: number): void {
  check(r.id.startsWith("chatcmpl-"), `id ${r.id}`);
  eq(r.object, "chat.completion", "object");
  check(isInt(r.created) && r.created > 1.7e9, "created");
  check(typeof r.model === "string" && r.model.length > 0, "model");
  eq(r.choices.length, n, "choices.length");
  r.choices.forEach((c, i) => {
    eq(c.index, i, "choice.index");
    eq(c.message.role, "assistant", "message.role");
    check(typeof c.message.content === "string", "message.content is a string");
    check(FINISH.has(c.finish_reason), `finish_reason ${c.finish_reason}`);
  });
  checkUsage(r.usage, maxTokens * n);
}

function checkCompletion(r: Completion, n: number, maxTokens: number): void {
  check(r.id.startsWith("cmpl-"), `id ${r.id}`);
  eq(r.object, "text_completion", "object");
  eq(r.choices.length, n, "choices.length");
  r.choices.forEach((c, i) => {
    eq(c.index, i, "choice.index");
    check(typeof c.text === "string", "text");
    check(c.finish_reason === "stop" || c.finish_reason === "length", "finish_reason");
  });
  checkUsage(r.usage, maxTokens * n);
}

// A request the client's types would refuse (wrong types, unknown fields) still goes through the
// client's transport and error mapping.
async function postRaw(client: OpenAI, path: string, body: Record<string, unknown>) {
  return client.post<unknown>(path, { body });
}

async function expectApiError(p: Promise<unknown>, status: number, param?: string | null) {
  try {
    await p;
  } catch (e) {
    check(e instanceof APIError, `not an APIError: ${String(e)}`);
    eq(e.status, status, `status (${e.message})`);
    check(isRecord(e.error) && typeof e.error["message"] === "string", "error.message");
    check(typeof e.type === "string" && e.type.length > 0, "error.type");
    if (param !== undefined) eq(e.param, param, "error.param");
    return e;
  }
  throw new CheckError(`expected HTTP ${status}, got a success`);
}

// Raw bytes over HTTP (for bodies no client would produce).
async function rawPost(base: string, path: string, body: Buffer, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}`, ...headers },
    });
    req.on("response", (res) => {
      let data = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (data += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: data }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

function errorOf(body: string): { message: string; type: string; param: unknown; code: unknown } {
  const j: unknown = JSON.parse(body);
  check(isRecord(j) && isRecord(j["error"]), `not an error body: ${body}`);
  const e = j["error"];
  check(typeof e["message"] === "string" && typeof e["type"] === "string", "error fields");
  check("param" in e && "code" in e, "error.param / error.code present");
  return { message: e["message"], type: e["type"], param: e["param"], code: e["code"] };
}

type Test = [string, () => Promise<void>];

async function mainServerTests(s: Server): Promise<Test[]> {
  const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: KEY, maxRetries: 0 });
  const messages = [{ role: "user" as const, content: "Hello there" }];
  return [
    ["health and metrics need no key", async () => {
      const h = await fetch(`${s.base}/health`);
      eq(h.status, 200, "/health");
      const m = await metrics(s.base);
      for (const name of ["deepinfer:num_requests_running", "deepinfer:num_requests_waiting",
        "deepinfer:kv_cache_usage_perc", "deepinfer:prefix_cache_queries_total",
        "deepinfer:prefix_cache_hits_total", "deepinfer:prompt_tokens_total",
        "deepinfer:generation_tokens_total", "deepinfer:time_to_first_token_seconds_count",
        "deepinfer:inter_token_latency_seconds_count", "deepinfer:e2e_request_latency_seconds_count"])
        check(Number.isFinite(metric(m, name)), name);
      check(Number.isFinite(metric(m, "deepinfer:request_success_total", 'finished_reason="abort"')),
        "aborted counter");
    }],
    ["models", async () => {
      const page = await client.models.list();
      eq(page.data.length, 1, "models");
      const m = page.data[0];
      check(m !== undefined && m.id === "x" && m.object === "model", "model entry");
      const one = await client.models.retrieve("x");
      eq(one.id, "x", "models.retrieve");
      const e = await expectApiError(client.models.retrieve("nope"), 404);
      eq(e.code, "model_not_found", "unknown model id");
      const e2 = await expectApiError(client.chat.completions.create({ model: "gpt-4o", messages,
        max_tokens: 2 }), 404);
      eq(e2.code, "model_not_found", "unknown model in a request");
      eq(e2.param, "model", "unknown model param");
    }],
    ["chat, non-streaming, with reasoning_content", async () => {
      const r = await client.chat.completions.create({ model: "x", messages, max_tokens: 6,
        temperature: 0 });
      checkChat(r, 1, 6);
      // Thinking is on by default: the message carries reasoning_content.
      check(hasReasoning(r.choices[0]?.message), "reasoning_content");
      // DeepSeek's switch (extra_body in the Python SDK): a non-literal passes the client's types.
      const off = { model: "x", messages, max_tokens: 4, thinking: { type: "disabled" } };
      const r2 = await client.chat.completions.create(off);
      checkChat(r2, 1, 4);
      check(!hasReasoning(r2.choices[0]?.message), "thinking disabled: no reasoning_content");
      eq(r2.usage?.completion_tokens_details?.reasoning_tokens, 0, "no reasoning tokens");
    }],
    ["prefix cache: a repeated request and the next turn report cached tokens", async () => {
      // About 400 prompt tokens of plain text; thinking off, so the next turn's prompt carries
      // the reply as it was generated.
      const long = Array.from({ length: 80 }, (_, i) => `word${i} and more`).join(" ");
      const conv = [{ role: "user" as const, content: long }];
      const base = { model: "x", max_tokens: 4, temperature: 0,
        thinking: { type: "disabled" } };
      const hitsBefore = metric(await metrics(s.base), "deepinfer:prefix_cache_hits_total");
      const first = await client.chat.completions.create({ ...base, messages: conv });
      const u1 = checkUsage(first.usage, 4);
      check(u1.prompt_tokens > 256, `prompt of ${u1.prompt_tokens} tokens is long enough`);
      const second = await client.chat.completions.create({ ...base, messages: conv });
      const u2 = checkUsage(second.usage, 4);
      eq(u2.prompt_tokens, u1.prompt_tokens, "same prompt");
      // Every whole 128-token block but one that leaves a token to compute.
      const want = Math.floor((u1.prompt_tokens - 1) / 128) * 128;
      eq(u2.prompt_tokens_details?.cached_tokens, want, "repeat: cached_tokens");
      eq(u2.prompt_cache_hit_tokens, want, "repeat: prompt_cache_hit_tokens");
      eq(u2.prompt_cache_miss_tokens, u1.prompt_tokens - want, "repeat: miss tokens");
      eq(second.choices[0]?.message.content, first.choices[0]?.message.content,
        "a cache hit changes no token");
      const next = await client.chat.completions.create({ ...base, messages: [...conv,
        { role: "assistant" as const, content: first.choices[0]?.message.content ?? "" },
        { role: "user" as const, content: "Go on." }] });
      const u3 = checkUsage(next.usage, 4);
      check((u3.prompt_tokens_details?.cached_tokens ?? 0) >= Math.floor(u1.prompt_tokens / 128) * 128,
        `next turn: cached ${u3.prompt_tokens_details?.cached_tokens} of ${u3.prompt_tokens}`);
      const hitsAfter = metric(await metrics(s.base), "deepinfer:prefix_cache_hits_total");
      check(hitsAfter - hitsBefore >= want, "metrics count the hits");
      // The retention class is checked: a bad one names the field.
      const bad = { ...base, messages: conv, cache_retention: "forever" };
      const e = await expectApiError(client.chat.completions.create(bad), 400);
      eq(e.param, "cache_retention", "bad cache_retention names the field");
    }],
    ["chat, streaming, include_usage", async () => {
      const stream = await client.chat.completions.create({ model: "x", messages, max_tokens: 5,
        stream: true, stream_options: { include_usage: true } });
      const chunks: ChatCompletionChunk[] = [];
      for await (const c of stream) chunks.push(c);
      check(chunks.length >= 2, "chunks");
      const first = chunks[0];
      eq(first?.choices[0]?.delta.role, "assistant", "first delta role");
      const ids = new Set(chunks.map((c) => c.id));
      eq(ids.size, 1, "one id per stream");
      for (const c of chunks) eq(c.object, "chat.completion.chunk", "chunk object");
      const last = chunks[chunks.length - 1];
      eq(last?.choices.length, 0, "usage chunk has no choices");
      const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason));
      const final = finishes.filter((f) => f !== null);
      eq(final.length, 1, "one finish_reason");
      check(FINISH.has(final[0] ?? ""), "finish_reason value");
      checkUsage(last?.usage, 5);
    }],
    ["completions, non-streaming and streaming", async () => {
      const r = await client.completions.create({ model: "x", prompt: "Once upon", max_tokens: 4 });
      checkCompletion(r, 1, 4);
      const stream = await client.completions.create({ model: "x", prompt: "Once upon",
        max_tokens: 4, stream: true, stream_options: { include_usage: true } });
      let text = "";
      let finish: string | null = null;
      let usage: CompletionUsage | undefined;
      for await (const c of stream) {
        eq(c.object, "text_completion", "chunk object");
        for (const ch of c.choices) {
          text += ch.text;
          if (ch.finish_reason !== null) finish = ch.finish_reason;
        }
        if (c.usage) usage = c.usage;
      }
      check(finish === "length" || finish === "stop", "stream finish_reason");
      checkUsage(usage, 4);
      check(typeof text === "string", "text");
    }],
    ["n > 1 (chat and streaming completions)", async () => {
      const r = await client.chat.completions.create({ model: "x", messages, max_tokens: 3, n: 3,
        seed: 7 });
      checkChat(r, 3, 3);
      const stream = await client.completions.create({ model: "x", prompt: "Hi", max_tokens: 3,
        n: 2, stream: true });
      const finished = new Map<number, string>();
      for await (const c of stream)
        for (const ch of c.choices) if (ch.finish_reason !== null) {
          check(!finished.has(ch.index), "one finish per index");
          finished.set(ch.index, ch.finish_reason);
        }
      eq([...finished.keys()].sort().join(","), "0,1", "both samples finished");
    }],
    ["logprobs (chat: bool + top_logprobs; completions: count)", async () => {
      const r = await client.chat.completions.create({ model: "x", messages, max_tokens: 4,
        logprobs: true, top_logprobs: 3 });
      checkChat(r, 1, 4);
      const lp = r.choices[0]?.logprobs?.content;
      check(Array.isArray(lp), "choices[0].logprobs.content");
      eq(lp.length, r.usage?.completion_tokens, "one logprob per token");
      for (const t of lp) {
        check(typeof t.token === "string" && t.logprob <= 0, "token logprob");
        check(Array.isArray(t.bytes), "bytes");
        eq(t.top_logprobs.length, 3, "top_logprobs length");
        const best = t.top_logprobs[0];
        check(best !== undefined && best.logprob >= t.logprob - 1e-4, "top is best first");
      }
      const c = await client.completions.create({ model: "x", prompt: "Hi", max_tokens: 3,
        logprobs: 2 });
      const clp = c.choices[0]?.logprobs;
      check(clp !== undefined && clp !== null, "completion logprobs");
      eq(clp.tokens?.length, c.usage?.completion_tokens, "tokens");
      eq(clp.token_logprobs?.length, clp.tokens?.length, "token_logprobs");
      eq(clp.text_offset?.[0], 0, "text_offset[0]");
      for (const top of clp.top_logprobs ?? []) eq(Object.keys(top).length <= 2, true, "top size");
      const stream = await client.chat.completions.create({ model: "x", messages, max_tokens: 3,
        logprobs: true, stream: true });
      let n = 0;
      for await (const ch of stream) n += ch.choices[0]?.logprobs?.content?.length ?? 0;
      eq(n, 3, "streamed logprobs, one per token");
    }],
    ["errors: 401, 404, 400 naming the param", async () => {
      const bad = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "wrong", maxRetries: 0 });
      const e401 = await expectApiError(bad.models.list(), 401);
      eq(e401.code, "invalid_api_key", "401 code");
      await expectApiError(client.get("/nope"), 404);
      await expectApiError(postRaw(client, "/chat/completions",
        { messages, temperature: "hot" }), 400, "temperature");
      await expectApiError(postRaw(client, "/completions", { prompt: "a", max_tokens: "many" }),
        400, "max_tokens");
      await expectApiError(postRaw(client, "/chat/completions", { messages, stream: "yes" }), 400,
        "stream");
      await expectApiError(postRaw(client, "/chat/completions", { messages, top_p: 7 }), 400,
        "top_p");
      await expectApiError(postRaw(client, "/chat/completions", { messages, top_logprobs: 2 }),
        400, "top_logprobs");
      await expectApiError(postRaw(client, "/completions", {}), 400, "prompt");
      await expectApiError(client.chat.completions.create({ model: "x", messages, max_tokens: 2,
        tools: [WEATHER_TOOL], tool_choice: { type: "function", function: { name: "nope" } } }),
        400, "tool_choice");
      // Forced calls go through the grammar: the random model must produce a parsable call.
      const pick: ChatCompletionTool = { type: "function", function: { name: "pick_city",
        parameters: { type: "object", properties: { city: { enum: ["Paris", "Rome"] } },
          required: ["city"] } } };
      for (const choice of ["required", { type: "function", function: { name: "pick_city" } }]) {
        const forced = await client.chat.completions.create({ model: "x", messages,
          max_tokens: 400, tools: [pick],
          tool_choice: choice as "required" });
        eq(forced.choices[0]?.finish_reason, "tool_calls", "forced tool call finished");
        const call = forced.choices[0]?.message.tool_calls?.[0];
        check(call !== undefined && call.type === "function" &&
          call.function.name === "pick_city", "forced call names the tool");
        if (call !== undefined && call.type === "function") {
          const args: unknown = JSON.parse(call.function.arguments);
          check(isRecord(args) && (args["city"] === "Paris" || args["city"] === "Rome"),
            `forced call arguments: ${call.function.arguments}`);
        }
      }
      checkChat(await client.chat.completions.create({ model: "x", messages, max_tokens: 2,
        tools: [WEATHER_TOOL], tool_choice: "none" }), 1, 2);
      // Never fits: rejected before any work.
      await expectApiError(client.completions.create({ model: "x", prompt: "a",
        max_tokens: 10_000_000 }), 400);
    }],
    ["response_format: text, json_object, json_schema (grammar-constrained)", async () => {
      const r = await client.chat.completions.create({ model: "x", messages, max_tokens: 2,
        response_format: { type: "text" } });
      checkChat(r, 1, 2);
      const o = await client.chat.completions.create({ model: "x", messages, max_tokens: 400,
        temperature: 0, response_format: { type: "json_object" } });
      checkChat(o, 1, 400);
      eq(o.choices[0]?.finish_reason, "stop", "json_object finished");
      const obj: unknown = JSON.parse(o.choices[0]?.message.content ?? "");
      check(isRecord(obj), "json_object content is a JSON object");
      check(!hasReasoning(o.choices[0]?.message), "structured output runs without thinking");
      const sc = await client.chat.completions.create({ model: "x", messages, max_tokens: 400,
        temperature: 0, response_format: { type: "json_schema", json_schema: { name: "answer",
          schema: { type: "object", properties: { answer: { type: "string", enum: ["yes", "no"] } },
            required: ["answer"], additionalProperties: false } } } });
      eq(sc.choices[0]?.finish_reason, "stop", "json_schema finished");
      const ans: unknown = JSON.parse(sc.choices[0]?.message.content ?? "");
      check(isRecord(ans) && (ans["answer"] === "yes" || ans["answer"] === "no") &&
        Object.keys(ans).length === 1, `schema-valid content: ${JSON.stringify(ans)}`);
      const e = await expectApiError(client.chat.completions.create({ model: "x", messages,
        max_tokens: 2, response_format: { type: "json_schema", json_schema: { name: "bad",
          schema: { type: "strnig" } } } }), 400, "response_format");
      check(e.message.includes("strnig"), "grammar error names the problem");
      await expectApiError(postRaw(client, "/chat/completions", { messages,
        response_format: { type: "yaml" } }), 400, "response_format.type");
    }],
    ["unknown fields are accepted and ignored", async () => {
      const r = await postRaw(client, "/chat/completions",
        { messages, max_tokens: 2, no_such_field: { a: [1] }, another: "x" });
      check(isRecord(r) && r["object"] === "chat.completion", "accepted");
    }],
    ["malformed JSON, invalid UTF-8, huge body", async () => {
      const m = await rawPost(s.base, "/v1/completions", Buffer.from('{"prompt": '));
      eq(m.status, 400, "malformed JSON status");
      eq(errorOf(m.body).code, "invalid_json", "malformed JSON code");
      const u = await rawPost(s.base, "/v1/completions",
        Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]));
      eq(u.status, 400, "invalid UTF-8 status");
      eq(errorOf(u.body).code, "invalid_utf8", "invalid UTF-8 code");
      const big = await rawPost(s.base, "/v1/completions", Buffer.alloc(2 << 20, 0x61));
      eq(big.status, 413, "huge body status");
      eq(errorOf(big.body).code, "request_too_large", "413 code");
    }],
    ["client disconnect mid-stream frees the request", async () => {
      const before = await metrics(s.base);
      const aborted0 = metric(before, "deepinfer:request_success_total", 'finished_reason="abort"');
      const ac = new AbortController();
      // ignore_eos is a vLLM extension: a non-literal object passes it through the client's types.
      const params = { model: "x", prompt: "Hi", max_tokens: 20000, stream: true as const,
        ignore_eos: true };
      const stream = await client.completions.create(params, { signal: ac.signal });
      let got = 0;
      try {
        for await (const c of stream) {
          got += c.choices.length;
          if (got >= 3) ac.abort();
        }
      } catch (e) {
        check(e instanceof Error && e.name.includes("Abort"), `abort error: ${String(e)}`);
      }
      await waitFor("aborted request freed", async () => {
        const m = await metrics(s.base);
        return metric(m, "deepinfer:request_success_total", 'finished_reason="abort"') ===
            aborted0 + 1 && metric(m, "deepinfer:num_requests_running") === 0 &&
          metric(m, "deepinfer:http_requests_in_flight") === 0 &&
          metric(m, "deepinfer:http_responses_in_progress") === 1 &&  // this scrape
          metric(m, "deepinfer:kv_cache_usage_perc") === 0;
      });
    }],
    ["metrics count what was served", async () => {
      const m = await metrics(s.base);
      check(metric(m, "deepinfer:prompt_tokens_total") > 0, "prompt_tokens_total");
      check(metric(m, "deepinfer:generation_tokens_total") > 0, "generation_tokens_total");
      check(metric(m, "deepinfer:time_to_first_token_seconds_count") > 0, "ttft count");
      check(metric(m, "deepinfer:inter_token_latency_seconds_count") > 0, "itl count");
      check(metric(m, "deepinfer:e2e_request_latency_seconds_count") > 0, "e2e count");
      check(metric(m, "deepinfer:request_success_total", 'finished_reason="length"') > 0, "length");
      check(metric(m, "deepinfer:http_responses_total", 'status="401"') >= 1, "401 counted");
    }],
  ];
}

async function scriptedServerTests(s: Server): Promise<Test[]> {
  const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "unused", maxRetries: 0 });
  const messages = [{ role: "user" as const, content: "Weather in Paris?" }];
  return [
    ["tool call + reasoning, non-streaming (scripted output)", async () => {
      // No max_tokens: chat's default runs to the context length (not 16), so the 80-odd
      // scripted tokens all come out and the finish is the scripted EOS.
      const r = await client.chat.completions.create({ model: "x", messages, tools: [WEATHER_TOOL] });
      checkChat(r, 1, 65536);
      check((r.usage?.completion_tokens ?? 0) > 16, "default max_tokens is not 16");
      const c = r.choices[0];
      check(c !== undefined, "choice");
      eq(c.finish_reason, "tool_calls", "finish_reason");
      check(hasReasoning(c.message), "reasoning_content");
      eq(c.message.reasoning_content, "Let me check the weather.", "reasoning_content");
      eq(c.message.content, "Checking now.", "content");
      const calls = c.message.tool_calls ?? [];
      eq(calls.length, 1, "tool_calls");
      const call = calls[0];
      check(call !== undefined && call.type === "function", "function call");
      eq(call.function.name, "get_weather", "name");
      eq(JSON.stringify(JSON.parse(call.function.arguments)), '{"city":"Paris","days":3}', "args");
      check(call.id.length > 0, "call id");
      const reasoning = r.usage?.completion_tokens_details?.reasoning_tokens ?? 0;
      check(reasoning > 0 && reasoning < (r.usage?.completion_tokens ?? 0), "reasoning_tokens");
    }],
    ["tool call + reasoning, streaming (scripted output)", async () => {
      const stream = await client.chat.completions.create({ model: "x", messages,
        tools: [WEATHER_TOOL], max_tokens: 200, stream: true,
        stream_options: { include_usage: true } });
      let reasoning = "", content = "", name = "", args = "", id = "";
      let finish: string | null = null;
      let usage: CompletionUsage | undefined;
      for await (const ch of stream) {
        if (ch.usage) usage = ch.usage;
        const c = ch.choices[0];
        if (c === undefined) continue;
        if (hasReasoning(c.delta)) reasoning += c.delta.reasoning_content;
        content += c.delta.content ?? "";
        for (const t of c.delta.tool_calls ?? []) {
          eq(t.index, 0, "tool index");
          if (t.id !== undefined) id = t.id;
          name += t.function?.name ?? "";
          args += t.function?.arguments ?? "";
        }
        if (c.finish_reason !== null) finish = c.finish_reason;
      }
      eq(reasoning, "Let me check the weather.", "streamed reasoning");
      eq(content, "Checking now.", "streamed content (no markup leaks)");
      eq(name, "get_weather", "streamed name");
      eq(JSON.stringify(JSON.parse(args)), '{"city":"Paris","days":3}', "streamed args");
      check(id.length > 0, "tool call id");
      eq(finish, "tool_calls", "finish_reason");
      const u = checkUsage(usage, 200);
      check((u.completion_tokens_details?.reasoning_tokens ?? 0) > 0, "reasoning_tokens");
    }],
    ["completions return the scripted text verbatim", async () => {
      const r = await client.completions.create({ model: "x", prompt: "x", max_tokens: 200 });
      eq(r.choices[0]?.text, SCRIPT, "text");
      eq(r.choices[0]?.finish_reason, "stop", "finish_reason");
    }],
  ];
}

// One running slot, one waiting slot, short timeout, long grace.
async function opsServerTests(s: Server): Promise<Test[]> {
  const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "unused", maxRetries: 0 });
  const long = { model: "x", prompt: "Hi", max_tokens: 20000, stream: true as const,
    ignore_eos: true };
  const longBlocking = { model: "x", prompt: "Hi", max_tokens: 20000, ignore_eos: true };
  return [
    ["429 once the waiting queue is full", async () => {
      const acA = new AbortController(), acB = new AbortController();
      const a = await client.completions.create(long, { signal: acA.signal });
      const itA = a[Symbol.asyncIterator]();
      await itA.next();  // A is running
      const b = await client.completions.create(long, { signal: acB.signal });  // B waits
      const e = await expectApiError(client.completions.create({ model: "x", prompt: "Hi",
        max_tokens: 2 }), 429);
      eq(e.code, "overloaded", "429 code");
      acA.abort();
      acB.abort();
      void b;
      await waitFor("A and B freed", async () =>
        metric(await metrics(s.base), "deepinfer:http_requests_in_flight") === 0);
    }],
    ["request timeout: 408 and a streamed error event", async () => {
      const e = await expectApiError(client.completions.create(longBlocking), 408);
      eq(e.code, "request_timeout", "408 code");
      const stream = await client.completions.create(long);
      let chunks = 0;
      try {
        for await (const c of stream) chunks += c.choices.length;
        throw new CheckError("stream ended without the timeout error");
      } catch (err) {
        check(err instanceof APIError, `streamed error: ${String(err)}`);
        eq(err.code, "request_timeout", "streamed error code");
      }
      check(chunks > 0, "tokens before the timeout");
    }],
  ];
}

async function runTests(tests: Test[]): Promise<number> {
  let failed = 0;
  for (const [name, fn] of tests) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e instanceof Error ? e.stack ?? e.message : String(e)}`);
    }
  }
  return failed;
}

function checkAccessLog(path: string): void {
  const lines = readFileSync(path, "utf8").split("\n").filter((l) => l.length > 0);
  check(lines.length > 10, "access log lines");
  let chat = 0;
  for (const l of lines) {
    const j: unknown = JSON.parse(l);
    check(isRecord(j) && typeof j["ts"] === "string" && isInt(j["status"]) &&
      typeof j["path"] === "string" && typeof j["method"] === "string", `access line ${l}`);
    if (j["path"] === "/v1/chat/completions" && j["status"] === 200) {
      check(isInt(j["prompt_tokens"]) && isInt(j["completion_tokens"]), "token counts");
      check(typeof j["request_id"] === "string", "request_id");
      chat++;
    }
  }
  check(chat > 3, "chat requests logged");
}

async function main(): Promise<number> {
  let failed = 0;
  const scriptPath = join(tmp, "script.txt");
  writeFileSync(scriptPath, SCRIPT);
  const accessLog = join(tmp, "access.jsonl");

  const main = await startServer(bin!, tmp, "main", ["--api-key", KEY, "--max-num-seqs", "8",
    "--access-log", accessLog, "--max-body-bytes", String(1 << 20)]);
  failed += await runTests(await mainServerTests(main));
  eq(await stopServer(main), 0, "main server exit code");
  failed += await runTests([["access log: one JSON line per request", async () =>
    checkAccessLog(accessLog)]]);

  const scripted = await startServer(bin!, tmp, "scripted",
    ["--debug-scripted-output", scriptPath]);
  failed += await runTests(await scriptedServerTests(scripted));
  eq(await stopServer(scripted), 0, "scripted server exit code");

  const ops = await startServer(bin!, tmp, "ops", ["--max-num-seqs", "1",
    "--max-waiting-requests", "1", "--request-timeout", "2"]);
  failed += await runTests(await opsServerTests(ops));
  eq(await stopServer(ops), 0, "ops server exit code");

  failed += await runTests(await drainTests());
  failed += await runTests([["503 while the model loads", loadingTest]]);
  return failed;
}

// The model's config.json is a FIFO, so loading blocks until the test writes it: a deterministic
// window in which the server listens but has no engine.
async function loadingTest(): Promise<void> {
  const dir = join(tmp, "fifo-model");
  execFileSync(bin!, ["make-tiny-model", dir], { stdio: "ignore" });
  const cfgPath = join(dir, "config.json");
  const cfg = readFileSync(cfgPath);
  unlinkSync(cfgPath);
  execFileSync("mkfifo", [cfgPath]);
  const s = await startServer(bin!, tmp, "loading", [dir], /*ready=*/false);
  const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "unused", maxRetries: 0 });
  try {
    const h = await fetch(`${s.base}/health`);
    eq(h.status, 503, "/health while loading");
    const e = await expectApiError(client.chat.completions.create({ model: "x",
      messages: [{ role: "user", content: "hi" }], max_tokens: 2 }), 503);
    eq(e.code, "loading", "503 code");
  } catch (err) {
    s.proc.kill("SIGKILL"); // its loader is stuck on the FIFO: SIGTERM would wait for it
    throw err;
  }
  writeFileSync(cfgPath, cfg); // unblocks the loader
  await waitFor("ready after loading", async () => (await fetch(`${s.base}/health`)).status === 200);
  checkChat(await client.chat.completions.create({ model: "x",
    messages: [{ role: "user", content: "hi" }], max_tokens: 2 }), 1, 2);
  eq(await stopServer(s), 0, "exit code");
}

// SIGTERM: running streams finish inside the grace period, new connections are refused, exit 0;
// past the grace period the rest are cancelled (finish_reason "abort") and it still exits 0.
async function drainTests(): Promise<Test[]> {
  const streamOnce = async (s: Server, maxTokens: number) => {
    const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "unused", maxRetries: 0 });
    const params = { model: "x", prompt: "Hi", max_tokens: maxTokens, stream: true as const,
      ignore_eos: true };
    const stream = await client.completions.create(params);
    const it = stream[Symbol.asyncIterator]();
    const first = await it.next();
    check(!first.done, "first chunk");
    return async () => {
      let finish: string | null = null;
      let tokens = 1;
      for (let r = await it.next(); !r.done; r = await it.next())
        for (const ch of r.value.choices) {
          if (ch.text.length > 0 || ch.finish_reason === null) tokens++;
          if (ch.finish_reason !== null) finish = ch.finish_reason;
        }
      return { finish, tokens };
    };
  };
  return [
    ["SIGTERM drains running requests, then exits 0", async () => {
      const s = await startServer(bin!, tmp, "drain", ["--shutdown-grace", "120"]);
      const rest = await streamOnce(s, 300);
      s.proc.kill("SIGTERM");
      await waitFor("listener closed", async () => {
        try {
          await fetch(`${s.base}/health`);
          return false;
        } catch {
          return true;
        }
      });
      const { finish } = await rest();
      eq(finish, "length", "the running stream completed");
      eq(await s.exited, 0, "exit code");
    }],
    ["SIGTERM past the grace period cancels the rest, exits 0", async () => {
      const s = await startServer(bin!, tmp, "drain-short", ["--shutdown-grace", "0.5"]);
      const rest = await streamOnce(s, 60000);
      s.proc.kill("SIGTERM");
      const { finish } = await rest();
      eq(finish, "abort", "cut off at the grace deadline");
      eq(await s.exited, 0, "exit code");
    }],
  ];
}

let code = 1;
try {
  const failed = await main();
  console.log(failed === 0 ? "PASS" : `${failed} FAILED`);
  code = failed === 0 ? 0 : 1;
} catch (e) {
  console.log(`FAIL: ${e instanceof Error ? e.stack ?? e.message : String(e)}`);
} finally {
  if (code === 0) rmSync(tmp, { recursive: true, force: true });
  else console.log(`logs kept in ${tmp}`);
}
process.exit(code);
