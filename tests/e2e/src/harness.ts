// Starting `deepinfer serve` on a free loopback port, reading its /metrics, and small typed
// assertion helpers shared by the e2e and load scripts.
import { ChildProcess, spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export class CheckError extends Error {}

export function check(cond: boolean, what: string): asserts cond {
  if (!cond) throw new CheckError(what);
}

export function eq<T>(got: T, want: T, what: string): void {
  check(got === want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      if (addr === null || typeof addr === "string") return reject(new Error("no port"));
      s.close(() => resolve(addr.port));
    });
  });
}

export interface Server {
  proc: ChildProcess;
  pid: number;
  base: string; // http://127.0.0.1:PORT
  logPath: string;
  exited: Promise<number | null>; // the exit code
}

// Spawns the binary and waits until /health is 200 (or, with `ready` false, until it answers).
export async function startServer(bin: string, tmp: string, name: string,
                                  args: string[], ready = true): Promise<Server> {
  const port = await freePort();
  const logPath = join(tmp, `${name}.log`);
  const log = createWriteStream(logPath);
  // Requests name model "x": it is the served name (another name is 404 model_not_found).
  // Last: the option takes every name that follows it (vLLM's nargs="+"), MODEL_DIR included.
  const proc = spawn(bin, ["serve", "--host", "127.0.0.1", "--port", String(port), ...args,
                           "--served-model-name", "x"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DEEPINFER_CACHE_DIR: join(tmp, "cache") },
  });
  proc.stdout?.pipe(log);
  proc.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  check(proc.pid !== undefined, "spawn failed");
  const base = `http://127.0.0.1:${port}`;
  let gone = false;
  void exited.then(() => (gone = true));
  for (let i = 0; i < 600; i++) {
    if (gone) throw new CheckError(`${name}: server exited:\n${readFileSync(logPath, "utf8")}`);
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200 || !ready) return { proc, pid: proc.pid, base, logPath, exited };
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  proc.kill("SIGKILL");
  throw new CheckError(`${name}: /health never became 200`);
}

export async function stopServer(s: Server): Promise<number | null> {
  s.proc.kill("SIGTERM");
  return s.exited;
}

// Prometheus text -> {"name{labels}": value}.
export async function metrics(base: string): Promise<Map<string, number>> {
  const r = await fetch(`${base}/metrics`);
  eq(r.status, 200, "/metrics status");
  const text = await r.text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const sp = line.lastIndexOf(" ");
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

// The one sample of `name` whose labels contain `labelPart` (e.g. 'finished_reason="abort"').
export function metric(m: Map<string, number>, name: string, labelPart = ""): number {
  for (const [k, v] of m) {
    if (k.startsWith(name + "{") && k.includes(labelPart)) return v;
  }
  throw new CheckError(`metric ${name}{${labelPart}} missing`);
}

// Anonymous resident memory (heap, stacks, device-side host buffers): what a leak grows. VmRSS
// also counts the pages of the mapped checkpoint that the page cache happens to have mapped in,
// which move with the machine's cache, not with the server's allocations.
export function rssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const m = /RssAnon:\s+(\d+) kB/.exec(status);
  check(m !== null && m[1] !== undefined, "RssAnon missing");
  return Number(m[1]);
}

// Polls `cond` (a state, not a duration) up to `tries` times.
export async function waitFor(what: string, cond: () => Promise<boolean>, tries = 300) {
  for (let i = 0; i < tries; i++) {
    if (await cond()) return;
    await sleep(50);
  }
  throw new CheckError(`timed out waiting for: ${what}`);
}
