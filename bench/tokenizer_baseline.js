// tokenizer_baseline.js — HuggingFace `tokenizers` (npm, native Rust) single-
// thread encode speed, the baseline bench_tokenizer.c runs alternately with ours.
//   node bench/tokenizer_baseline.js TOKENIZER_JSON TEXT_FILE REPS [whole|para]
// whole: the file as one string; para: each piece between "\n\n" separately
// (the separators dropped), which is how documents arrive in hm-tokenize.
// prints one JSON line: {"mb_per_s": [..one per rep..], "tokens": N}
// Install (once): (cd bench && npm install --no-save tokenizers@0.23.2)
'use strict';
process.env.TOKENIZERS_PARALLELISM = 'false';
const path = require('path');
const fs = require('fs');
let tk;
try { tk = require(path.join(__dirname, 'node_modules', 'tokenizers')); }
catch (e) { tk = require('tokenizers'); }
const [tokPath, textPath, repsArg, modeArg] = process.argv.slice(2);
const mode = modeArg || 'whole';
const tok = tk.Tokenizer.fromFile(tokPath);
const text = fs.readFileSync(textPath, 'utf8');
const bytes = Buffer.byteLength(text, 'utf8');
const reps = parseInt(repsArg || '3', 10);
(async () => {
  const pieces = mode === 'para' ? text.split('\n\n') : [text];
  const opts = { addSpecialTokens: false };
  let tokens = 0;
  for (const p of pieces) await tok.encode(p, null, opts); // warm-up
  const rates = [];
  for (let r = 0; r < reps; r++) {
    tokens = 0;
    const t0 = process.hrtime.bigint();
    for (const p of pieces) {
      const enc = await tok.encode(p, null, opts);
      tokens += enc.getIds().length;
    }
    const t1 = process.hrtime.bigint();
    rates.push(bytes / 1e6 / (Number(t1 - t0) / 1e9));
  }
  process.stdout.write(JSON.stringify({ mb_per_s: rates, tokens }) + '\n');
})();
