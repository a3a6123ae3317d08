// check_external.mjs — checks the external data of an hm ONNX graph (contract
// §11, docs/onnx.md) with a protobuf reader of its own (not hm's protobuf-c
// code), against the checkpoint it came from:
//
//   node tests/onnx/check_external.mjs --model M.onnx --weights W.safetensors
//
// Every initializer of the graph is either inline (raw_data; only the
// graph's constants hm.const.*) or external: data_location EXTERNAL (1),
// external_data exactly location / offset / length, location the one file
// beside M ("model.onnx.data" or M's name + ".data"), offset a multiple of
// 64, length = numel · 4 (FLOAT), the tensors in increasing offsets without
// overlap, the gaps zero bytes, the file ending at the last tensor. Each
// initializer named like a tensor of W (an F32 safetensors file) has W's
// shape and W's bytes; every tensor of W is one (except legacy buffers:
// names ending in .attention.bias, .masked_bias, .rotary_emb.inv_freq).
// Reads the data file tensor by tensor (a 2 GiB+ file never sits in memory).
// Prints one JSON line; exit 0 ok, 1 a finding, 2 bad usage.
import fs from 'node:fs';
import path from 'node:path';

function die(code, msg) {
  process.stderr.write(`check_external.mjs: ${msg}\n`);
  process.exit(code);
}

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (i + 1 >= process.argv.length) die(2, `${a} needs a value`);
  if (a === '--model') args.model = process.argv[++i];
  else if (a === '--weights') args.weights = process.argv[++i];
  else die(2, `unknown option '${a}'`);
}
if (!args.model || !args.weights) die(2, 'usage: --model M.onnx --weights W.safetensors');

// ---- protobuf wire format (varint, 64-bit, length-delimited, 32-bit) ----
function* fields(buf, start = 0, end = buf.length) {
  let p = start;
  const varint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      if (p >= end) die(1, `'${args.model}': truncated varint at byte ${p}`);
      const b = buf[p++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (p < end) {
    const key = varint();
    const num = Number(key >> 3n), wt = Number(key & 7n);
    if (wt === 0) yield { num, wt, v: varint() };
    else if (wt === 1) { yield { num, wt, at: p }; p += 8; }
    else if (wt === 2) {
      const n = Number(varint());
      if (p + n > end) die(1, `'${args.model}': field ${num} runs past its message`);
      yield { num, wt, start: p, end: p + n };
      p += n;
    } else if (wt === 5) { yield { num, wt, at: p }; p += 4; }
    else die(1, `'${args.model}': wire type ${wt} at byte ${p}`);
  }
}
const str = (buf, f) => buf.toString('utf8', f.start, f.end);

function tensor(buf, f) {
  const t = { dims: [], ext: [], location: 0, raw: false };
  for (const g of fields(buf, f.start, f.end)) {
    if (g.num === 1 && g.wt === 0) t.dims.push(Number(g.v));
    else if (g.num === 1 && g.wt === 2) // packed dims
      for (const d of packedVarints(buf, g)) t.dims.push(d);
    else if (g.num === 2) t.type = Number(g.v);
    else if (g.num === 8) t.name = str(buf, g);
    else if (g.num === 9) t.raw = true;
    else if (g.num === 13) {
      const e = {};
      for (const h of fields(buf, g.start, g.end)) e[h.num === 1 ? 'key' : 'value'] = str(buf, h);
      t.ext.push(e);
    } else if (g.num === 14) t.location = Number(g.v);
  }
  return t;
}
function* packedVarints(buf, f) {
  let p = f.start;
  while (p < f.end) {
    let v = 0, s = 0, b;
    do { b = buf[p++]; v += (b & 0x7f) * 2 ** s; s += 7; } while (b & 0x80);
    yield v;
  }
}

const model = fs.readFileSync(args.model);
let graph;
for (const f of fields(model)) if (f.num === 7) graph = f;
if (!graph) die(1, `'${args.model}': no graph`);
const inits = [];
for (const f of fields(model, graph.start, graph.end)) if (f.num === 5) inits.push(tensor(model, f));

// ---- the checkpoint ----
const wfd = fs.openSync(args.weights, 'r');
const head8 = Buffer.alloc(8);
fs.readSync(wfd, head8, 0, 8, 0);
const hlen = Number(head8.readBigUInt64LE(0));
const hbuf = Buffer.alloc(hlen);
fs.readSync(wfd, hbuf, 0, hlen, 8);
const header = JSON.parse(hbuf.toString('utf8'));
delete header.__metadata__;
const legacy = /\.(attention\.bias|attention\.masked_bias|rotary_emb\.inv_freq)$/;

// ---- the checks ----
const findings = [];
const bad = (msg) => { if (findings.length < 20) findings.push(msg); };
let dataPath = null, dfd = null, end = 0, external = 0, inline = 0, matched = 0, bytes = 0;
const zero = (b) => b.every((x) => x === 0);
const seen = new Set();
for (const t of inits) {
  if (!t.ext.length && t.location !== 1) {
    inline++;
    if (!t.name.startsWith('hm.const.')) bad(`'${t.name}' is inline, not external data`);
    if (!t.raw) bad(`'${t.name}' has neither raw_data nor external data`);
    continue;
  }
  external++;
  if (t.location !== 1) bad(`'${t.name}': data_location ${t.location}, not EXTERNAL (1)`);
  if (t.raw) bad(`'${t.name}': raw_data beside external data`);
  const keys = t.ext.map((e) => e.key).join(',');
  if (keys !== 'location,offset,length') bad(`'${t.name}': external_data keys ${keys}`);
  const e = Object.fromEntries(t.ext.map((x) => [x.key, x.value]));
  if (!/^\d+$/.test(e.offset ?? '') || !/^\d+$/.test(e.length ?? '')) {
    bad(`'${t.name}': offset '${e.offset}' length '${e.length}'`);
    continue;
  }
  const off = Number(e.offset), len = Number(e.length);
  const numel = t.dims.reduce((a, b) => a * b, 1);
  if (t.type !== 1) bad(`'${t.name}': data_type ${t.type}, not FLOAT (1)`);
  if (off % 64) bad(`'${t.name}': offset ${off} is not a multiple of 64`);
  if (len !== numel * 4) bad(`'${t.name}': length ${len}, numel ${numel} × 4 = ${numel * 4}`);
  if (off < end) bad(`'${t.name}': offset ${off} overlaps the previous tensor (ends at ${end})`);
  const p = path.join(path.dirname(args.model), e.location ?? '');
  if (dataPath === null) {
    dataPath = p;
    if (e.location !== 'model.onnx.data' && e.location !== path.basename(args.model) + '.data')
      bad(`location '${e.location}' is not model.onnx.data nor ${path.basename(args.model)}.data`);
    dfd = fs.openSync(dataPath, 'r');
  } else if (p !== dataPath) bad(`'${t.name}': a second data file '${e.location}'`);
  const gap = Math.max(0, off - end);
  const buf = Buffer.alloc(gap + len);
  if (fs.readSync(dfd, buf, 0, buf.length, off - gap) !== buf.length) {
    bad(`'${t.name}': the data file ends before byte ${off + len}`);
    continue;
  }
  if (!zero(buf.subarray(0, gap))) bad(`'${t.name}': the gap before it is not zero bytes`);
  const got = buf.subarray(gap);
  end = off + len;
  bytes += len;
  const w = header[t.name];
  if (!w) {
    if (!t.name.startsWith('hm.')) bad(`'${t.name}' is not a tensor of '${args.weights}'`);
    continue;
  }
  seen.add(t.name);
  if (w.dtype !== 'F32') { bad(`'${args.weights}': '${t.name}' is ${w.dtype}, not F32`); continue; }
  if (w.shape.join() !== t.dims.join()) bad(`'${t.name}': dims [${t.dims}], checkpoint [${w.shape}]`);
  const [s, f] = w.data_offsets;
  const ck = Buffer.alloc(f - s);
  fs.readSync(wfd, ck, 0, ck.length, 8 + hlen + s);
  if (!ck.equals(got)) bad(`'${t.name}': bytes differ from the checkpoint's`);
  else matched++;
}
if (dfd !== null) {
  const size = fs.fstatSync(dfd).size;
  if (size !== end) bad(`'${dataPath}' has ${size} bytes, its last tensor ends at ${end}`);
}
for (const name of Object.keys(header))
  if (!seen.has(name) && !legacy.test(name)) bad(`checkpoint tensor '${name}' is no external initializer`);
if (!external) bad('no initializer is external');
process.stdout.write(JSON.stringify({ model: args.model, data: dataPath, external, inline,
  checkpoint_tensors_matched: matched, data_bytes: end, tensor_bytes: bytes,
  ok: findings.length === 0, findings }) + '\n');
process.exit(findings.length ? 1 : 0);
