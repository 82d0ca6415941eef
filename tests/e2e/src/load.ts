// Bounded load: N concurrent streaming chat requests through the official client on loopback.
// Every request must complete or fail with a well-formed API error, each exactly once; the
// server must be idle again afterwards with its anonymous RSS near the baseline taken after a
// warm-up burst, and two more identical bursts must not both grow it by over 16 MiB (no memory
// kept per request). Prints p50/p99 TTFT and ITL, and throughput (reported, never asserted).
// Usage: node dist/load.js path/to/deepinfer N [max_tokens] [tmpdir] [extra serve flags...]
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI, { APIError } from "openai";
import { check, eq, metric, metrics, rssKb, startServer, stopServer, waitFor } from "./harness.js";
import type { Server } from "./harness.js";

const bin = process.argv[2];
const total = Number(process.argv[3] ?? "1000");
const maxTokens = Number(process.argv[4] ?? "16");
if (bin === undefined || !Number.isInteger(total) || total <= 0)
  throw new Error("usage: load.js path/to/deepinfer N [max_tokens] [tmpdir]");
const tmp = mkdtempSync(join(process.argv[5] ?? "/tmp", "deepinfer-load-"));

interface Outcome {
  ok: boolean;
  id: string;
  ttft: number; // seconds from send to the first token chunk
  itls: number[]; // seconds between successive token chunks
  completionTokens: number;
  error: string;
}

async function one(client: OpenAI, i: number): Promise<Outcome> {
  const t0 = performance.now();
  const out: Outcome = { ok: false, id: "", ttft: -1, itls: [], completionTokens: 0, error: "" };
  try {
    const stream = await client.chat.completions.create({
      model: "x",
      messages: [{ role: "user", content: `request ${i}: say something` }],
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    });
    let last = -1;
    let finishes = 0, usages = 0;
    for await (const c of stream) {
      if (out.id === "") out.id = c.id;
      eq(c.id, out.id, "one id per stream");
      if (c.usage) {
        usages++;
        out.completionTokens = c.usage.completion_tokens;
      }
      for (const ch of c.choices) {
        const d = ch.delta;
        const text = (d.content ?? "") + (("reasoning_content" in d &&
          typeof d.reasoning_content === "string") ? d.reasoning_content : "");
        if (text.length > 0) {
          const now = performance.now();
          if (last < 0) out.ttft = (now - t0) / 1000;
          else out.itls.push((now - last) / 1000);
          last = now;
        }
        if (ch.finish_reason !== null) finishes++;
      }
    }
    eq(finishes, 1, "one finish_reason");
    eq(usages, 1, "one usage chunk");
    out.ok = true;
  } catch (e) {
    // Well-formed: the client parsed an OpenAI error (status + message) from the server.
    check(e instanceof APIError && e.message.length > 0 && e.status !== undefined,
      `request ${i} failed without a well-formed API error: ${String(e)}`);
    out.error = `${e.status} ${e.code ?? ""}`;
  }
  return out;
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

// The server under load, killed in the `finally` below if a check fails before it is stopped.
let server: Server | undefined;

async function main(): Promise<void> {
  const s = await startServer(bin!, tmp, "load",
    ["--access-log", join(tmp, "access.jsonl"), ...process.argv.slice(6)]);
  server = s;
  const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "unused", maxRetries: 0,
    timeout: 600_000 });
  // Warm-up with one full burst, so the baseline includes one-time allocations (tokenizer
  // caches, buffers, state pages first touched) and the allocator's arenas at this concurrency.
  // A warm-up smaller than the burst left the arenas of the first real burst counted as growth.
  const warm = await burst(client);
  eq(warm.ok.length + warm.failed.length, total, "warm-up burst settled every request");
  await waitFor("idle after warm-up", async () =>
    metric(await metrics(s.base), "deepinfer:http_requests_in_flight") === 0);
  const rssBefore = rssKb(s.pid);

  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, rssKb(s.pid))), 100);
  const t0 = performance.now();
  const { ok, failed } = await burst(client);
  const wall = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  await idle(s.base);
  const m = await metrics(s.base);
  const served = metric(m, "deepinfer:request_success_total", 'finished_reason="stop"') +
    metric(m, "deepinfer:request_success_total", 'finished_reason="length"');
  eq(served, ok.length + warm.ok.length,
    "server-side finished count = client successes (+ warm-up)");
  await sleep(500);
  const rssAfter = rssKb(s.pid);
  // Two more identical bursts: memory kept per request grows RSS over each of them; the
  // allocator's high-water mark may still move once (seen here: 18 MiB over one burst, with
  // tests running beside it) and then settles.
  const second = await burst(client);
  await idle(s.base);
  await sleep(500);
  const rssAfterSecond = rssKb(s.pid);
  const third = await burst(client);
  await idle(s.base);
  await sleep(500);
  const rssAfterThird = rssKb(s.pid);

  const ttfts = ok.map((o) => o.ttft).filter((t) => t >= 0);
  const itls = ok.flatMap((o) => o.itls);
  const tokens = ok.reduce((a, o) => a + o.completionTokens, 0);
  const errors = new Map<string, number>();
  for (const f of failed) errors.set(f.error, (errors.get(f.error) ?? 0) + 1);
  const summary = {
    requests: total, ok: ok.length, failed: failed.length, errors: Object.fromEntries(errors),
    max_tokens: maxTokens, wall_s: +wall.toFixed(2),
    ttft_p50_s: +pct(ttfts, 50).toFixed(4), ttft_p99_s: +pct(ttfts, 99).toFixed(4),
    itl_p50_s: +pct(itls, 50).toFixed(4), itl_p99_s: +pct(itls, 99).toFixed(4),
    output_tokens: tokens, tokens_per_s: +(tokens / wall).toFixed(1),
    requests_per_s: +(ok.length / wall).toFixed(2),
    rss_before_mib: +(rssBefore / 1024).toFixed(1), rss_peak_mib: +(peak / 1024).toFixed(1),
    rss_after_mib: +(rssAfter / 1024).toFixed(1),
    second_burst_ok: second.ok.length, rss_after_second_burst_mib: +(rssAfterSecond / 1024).toFixed(1),
    third_burst_ok: third.ok.length, rss_after_third_burst_mib: +(rssAfterThird / 1024).toFixed(1),
  };
  console.log(JSON.stringify(summary));
  // Near baseline: what the load added (peak - before) is mostly given back, within 32 MiB.
  const grown = rssAfter - rssBefore;
  check(grown <= Math.max(32 * 1024, 0.25 * (peak - rssBefore)),
    `RSS did not return near baseline: before ${rssBefore} kB, peak ${peak} kB, after ${rssAfter} kB`);
  check(Math.min(rssAfterSecond - rssAfter, rssAfterThird - rssAfterSecond) <= 16 * 1024,
    `RSS grew by more than 16 MiB over each of two more bursts: ${rssAfter} kB -> ` +
    `${rssAfterSecond} kB -> ${rssAfterThird} kB`);
  eq(await stopServer(s), 0, "server exit code");
}

// `total` concurrent streams; none lost or duplicated: each settles once, each success has its
// own server id.
async function burst(client: OpenAI): Promise<{ ok: Outcome[]; failed: Outcome[] }> {
  const seen = new Array<number>(total).fill(0);
  const outcomes = await Promise.all(Array.from({ length: total }, async (_, i) => {
    const o = await one(client, i);
    seen[i] = (seen[i] ?? 0) + 1;
    return o;
  }));
  eq(outcomes.length, total, "outcomes");
  check(seen.every((n) => n === 1), "every request settled exactly once");
  const ok = outcomes.filter((o) => o.ok);
  const failed = outcomes.filter((o) => !o.ok);
  eq(new Set(ok.map((o) => o.id)).size, ok.length, "distinct response ids");
  eq(ok.length + failed.length, total, "ok + failed");
  return { ok, failed };
}

// Every request finished and its state freed, server-side.
async function idle(base: string): Promise<void> {
  await waitFor("server idle after the load", async () => {
    const m = await metrics(base);
    return metric(m, "deepinfer:http_requests_in_flight") === 0 &&
      metric(m, "deepinfer:http_responses_in_progress") === 1 && // this scrape
      metric(m, "deepinfer:num_requests_running") === 0 &&
      metric(m, "deepinfer:kv_cache_usage_perc") === 0;
  });
}

let code = 1;
try {
  await main();
  console.log("PASS");
  code = 0;
} catch (e) {
  console.log(`FAIL: ${e instanceof Error ? e.stack ?? e.message : String(e)}`);
} finally {
  if (code !== 0 && server && server.proc.exitCode === null) server.proc.kill("SIGKILL");
  if (code === 0) rmSync(tmp, { recursive: true, force: true });
  else console.log(`logs kept in ${tmp}`);
}
process.exit(code);
