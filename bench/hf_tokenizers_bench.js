// Peer figure for bench/tokenizer_bench: HF tokenizers (Rust, npm binding) on the same corpus.
// Usage: node hf_tokenizers_bench.js CORPUS.jsonl TOKENIZER.json REPS
// Prints one JSON line: {"mb_per_s", "tokens", "checksum"}.
'use strict';
const fs = require('fs');
const path = require('path');
let Tokenizer;
try {
  ({Tokenizer} = require(path.join(__dirname, 'node_modules', 'tokenizers')));
} catch (e) {
  console.log(JSON.stringify({error: 'npm package tokenizers not installed in bench/node_modules'}));
  process.exit(3);
}
const [corpusPath, tokPath, repsArg] = process.argv.slice(2);
const docs = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
const bytes = docs.reduce((a, d) => a + Buffer.byteLength(d, 'utf8'), 0);
const tok = Tokenizer.fromFile(tokPath);
(async () => {
  let best = Infinity, tokens = 0, checksum = 0;
  for (let r = 0; r < Number(repsArg || 3); ++r) {
    tokens = 0;
    checksum = 0;
    const t0 = process.hrtime.bigint();
    for (const d of docs) {
      // One encode at a time, awaited: single-threaded like ours.
      const ids = (await tok.encode(d)).getIds();
      for (let i = 0; i < ids.length; ++i) checksum = (checksum * 31 + ids[i]) >>> 0;
      tokens += ids.length;
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.min(best, s);
  }
  console.log(JSON.stringify({mb_per_s: bytes / 1e6 / best, tokens, checksum, seconds: best}));
})();
