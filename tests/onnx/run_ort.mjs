// run_ort.mjs — runs an hm student's ONNX graph (contract §9) in ONNX Runtime
// (npm onnxruntime-node, CPU) and compares its logits with hm's.
//
//   node tests/onnx/run_ort.mjs --model M.onnx --tokens T.tok --ref R.safetensors
//        [--tol 1e-4] [--prefill P] [--chunk C]
//
// T.tok: an hm token file (docs/token-file.md); R.safetensors: tensor
// 'logits' F32 [W, L, V], hm's logits of the W windows of L tokens that start
// the token file (what `hm-eval --dump-logits` writes; positions restart at 0
// in every window). The windows run as one batch of W sequences, three ways:
//   full     seq = L at once from the zero state;
//   steps    L calls with seq = 1, the state carried from call to call;
//   chunked  a prefill of P tokens from the zero state, a second chunk of C
//            tokens from the carried state (seq > 1 after a state), then
//            steps for the rest.
// Each is compared with R as max |ort − hm| / max |hm| (contract §7's relative
// error) and must be ≤ tol (max |ort − hm| and max |hm| are printed too).
// The model is loaded from its path, so ONNX Runtime finds external data
// (model.onnx.data) beside it. Prints one JSON line per way and a closing
// "N passed, N failed" line. Exit 0 all passed, 1 a failure, 2 bad usage,
// 77 onnxruntime-node is not installed (the caller skips visibly).
//
// Install ONNX Runtime (CPU binaries are bundled; the install script only
// fetches GPU parts):  npm install --prefix tests/onnx --ignore-scripts --no-package-lock
import fs from 'node:fs';

function die(code, msg) {
  process.stderr.write(`run_ort.mjs: ${msg}\n`);
  process.exit(code);
}

const args = { tol: 1e-4, prefill: -1, chunk: -1 };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  const val = () => {
    if (i + 1 >= process.argv.length) die(2, `${a} needs a value`);
    return process.argv[++i];
  };
  if (a === '--model') args.model = val();
  else if (a === '--tokens') args.tokens = val();
  else if (a === '--ref') args.ref = val();
  else if (a === '--tol') args.tol = Number(val());
  else if (a === '--prefill') args.prefill = Number(val());
  else if (a === '--chunk') args.chunk = Number(val());
  else die(2, `unknown option '${a}'`);
}
if (!args.model || !args.tokens || !args.ref) die(2, 'usage: --model M.onnx --tokens T.tok --ref R.safetensors');
if (!(args.tol > 0)) die(2, `bad --tol '${args.tol}'`);

let ort;
try {
  ort = (await import('onnxruntime-node')).default;
} catch (e) {
  process.stdout.write(`SKIP: onnxruntime-node is not installed (${String(e.message).split('\n')[0]}); ` +
    'npm install --prefix tests/onnx --ignore-scripts --no-package-lock\n');
  process.exit(77);
}

function readTokens(path) {
  const b = fs.readFileSync(path);
  if (b.length < 48 || b.toString('latin1', 0, 8) !== 'HMTOKENS') die(1, `'${path}' is not an hm token file`);
  const width = b.readUInt32LE(12);
  const n = Number(b.readBigUInt64LE(24));
  if ((width !== 2 && width !== 4) || b.length !== 48 + n * width) die(1, `'${path}': bad size or width`);
  const ids = new Array(n);
  for (let i = 0; i < n; i++) ids[i] = width === 2 ? b.readUInt16LE(48 + 2 * i) : b.readUInt32LE(48 + 4 * i);
  return ids;
}

function readLogits(path) {
  const b = fs.readFileSync(path);
  const hlen = Number(b.readBigUInt64LE(0));
  const header = JSON.parse(b.toString('utf8', 8, 8 + hlen));
  const t = header.logits;
  if (!t || t.dtype !== 'F32' || t.shape.length !== 3) die(1, `'${path}': no F32 tensor 'logits' [W, L, V]`);
  const [s, e] = t.data_offsets;
  const start = 8 + hlen + s;
  const data = new Float32Array((e - s) / 4);
  for (let i = 0; i < data.length; i++) data[i] = b.readFloatLE(start + 4 * i);
  return { shape: t.shape, data };
}

const ids = readTokens(args.tokens);
const ref = readLogits(args.ref);
const [W, L, V] = ref.shape;
if (ids.length < W * L) die(1, `'${args.tokens}' holds ${ids.length} tokens, fewer than ${W} x ${L}`);
const P = args.prefill >= 0 ? args.prefill : Math.max(1, Math.floor(L / 3));
const C = args.chunk >= 0 ? args.chunk : Math.max(1, Math.floor((L - P) / 2));
if (P < 1 || P + C > L) die(2, `--prefill ${P} --chunk ${C} do not fit L = ${L}`);

const session = await ort.InferenceSession.create(args.model);
const stateInputs = session.inputMetadata.filter((m) => m.name.startsWith('past_'));
// a hybrid's kept layers (contract §11): past_key.{l} / past_value.{l}
// [batch, n_kv, past, p], empty for a fresh sequence; every other state dim is static
const isKV = (m) => m.name.startsWith('past_key.') || m.name.startsWith('past_value.');
for (const m of stateInputs) {
  const dims = m.shape.slice(1);
  if (isKV(m) ? typeof dims[0] !== 'number' || typeof dims[2] !== 'number' || dims.length !== 3
      : dims.some((d) => typeof d !== 'number'))
    die(1, `${m.name}: state dims ${JSON.stringify(m.shape)} are not as docs/onnx.md says`);
}

function zeroState() {
  const st = {};
  for (const m of stateInputs) {
    const dims = isKV(m) ? [W, m.shape[1], 0, m.shape[3]] : [W, ...m.shape.slice(1)];
    st[m.name] = new ort.Tensor('float32', new Float32Array(dims.reduce((a, b) => a * b, 1)), dims);
  }
  return st;
}

// Runs tokens [t0, t1) of every window from state st; returns
// { logits: Float32Array [W, t1 − t0, V], state }.
async function run(st, t0, t1) {
  const S = t1 - t0;
  const tok = new BigInt64Array(W * S), pos = new BigInt64Array(W * S);
  for (let w = 0; w < W; w++)
    for (let s = 0; s < S; s++) {
      tok[w * S + s] = BigInt(ids[w * L + t0 + s]);
      pos[w * S + s] = BigInt(t0 + s);
    }
  const feeds = { ...st, input_ids: new ort.Tensor('int64', tok, [W, S]),
    position_ids: new ort.Tensor('int64', pos, [W, S]) };
  const out = await session.run(feeds);
  const next = {};
  for (const m of stateInputs) next[m.name] = out[m.name.replace('past_', 'present_')];
  const lg = out.logits;
  if (lg.dims.join() !== [W, S, V].join()) die(1, `logits dims ${lg.dims} are not [${W}, ${S}, ${V}]`);
  return { logits: lg.data, state: next };
}

// Runs the windows in the given chunk lengths; returns logits [W, L, V].
async function runChunks(chunks) {
  const got = new Float32Array(W * L * V);
  let st = zeroState(), t = 0;
  for (const n of chunks) {
    const r = await run(st, t, t + n);
    for (let w = 0; w < W; w++)
      got.set(r.logits.subarray(w * n * V, (w + 1) * n * V), (w * L + t) * V);
    st = r.state;
    t += n;
  }
  return got;
}

// { rel: max |Δ| / max |hm|, abs: max |Δ|, ref: max |hm| }
function relErr(got) {
  let md = 0, mr = 0;
  for (let i = 0; i < got.length; i++) {
    const d = Math.abs(got[i] - ref.data[i]);
    if (!(d <= md)) md = d; // NaN propagates
    mr = Math.max(mr, Math.abs(ref.data[i]));
  }
  return { rel: md / (mr > 0 ? mr : 1), abs: md, ref: mr };
}

const ways = {
  full: [L],
  steps: Array(L).fill(1),
  chunked: [P, ...(C > 0 ? [C] : []), ...Array(L - P - C).fill(1)],
};
let passed = 0, failed = 0;
for (const [name, chunks] of Object.entries(ways)) {
  const e = relErr(await runChunks(chunks));
  const ok = e.rel <= args.tol;
  if (ok) passed++; else failed++;
  process.stdout.write(JSON.stringify({ model: args.model, way: name, batch: W, seq: L,
    chunks: name === 'chunked' ? [P, C] : undefined, max_rel_err: e.rel, max_abs_err: e.abs,
    max_abs_logit: e.ref, tol: args.tol, ok }) + '\n');
}
process.stdout.write(`onnx: ${passed} passed, ${failed} failed\n`);
process.exit(failed ? 1 : 0);
