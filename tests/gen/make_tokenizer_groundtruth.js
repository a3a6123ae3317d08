// make_tokenizer_groundtruth.js — writes tests/data/tokenizer/extra-groundtruth.jsonl,
// the token ids HuggingFace `tokenizers` (npm 0.23.2, native) gives for the
// GPT-NeoX-20B tokenizer, for tests/test_tokenizer.c.
//
// How to run (from the repository root; node_modules stays outside the repo
// or in the git-ignored tests/gen/node_modules):
//   (cd tests/gen && npm install --no-save tokenizers@0.23.2)
//   node tests/gen/make_tokenizer_groundtruth.js ../shared/data \
//        > tests/data/tokenizer/extra-groundtruth.jsonl
// Each line: {"source","index","text","ids"}; encode(text, null,
// {addSpecialTokens: false}). Deterministic: same inputs give the same file.
'use strict';
const fs = require('fs');
const path = require('path');
let tokenizers;
try { tokenizers = require('tokenizers'); } catch (e) {
  tokenizers = require(path.join(process.cwd(), 'node_modules', 'tokenizers'));
}
const data = process.argv[2] || '../shared/data';
const tok = tokenizers.Tokenizer.fromFile(path.join(data, 'gpt-neox-20b_tokenizer.json'));

const cases = [];
function add(source, text) { cases.push({ source, text }); }

// tricky strings
for (let n = 1; n <= 30; n++) {
  const sp = ' '.repeat(n);
  add('spaces', sp);
  add('spaces', 'a' + sp + 'b');
  add('spaces', 'x' + sp);
  add('spaces', sp + 'word');
  add('spaces', 'end.' + sp + '\n' + sp + 'next');
  add('spaces', '(' + sp + ')' + sp + '1' + sp + '\t');
}
const mixes = ['\t', '\n', '\r\n', ' \t ', '\t\t\n  ', '\n \n', ' \n\n ', '\u00a0', '\u3000',
  '\u2028', '\u000b\u000c', '\u0085', '\u200b', '  \t\t  ', '\n\n\n\n   \n'];
for (const m of mixes) {
  add('whitespace', 'a' + m + 'b');
  add('whitespace', m);
  add('whitespace', 'word' + m);
  add('whitespace', m + 'word' + m + '?' + m + '12');
}
const eot = '<|endoftext|>';
add('special', eot);
add('special', 'hello' + eot + 'world');
add('special', 'hello ' + eot + ' world');
add('special', eot + eot + '  ' + eot);
add('special', '<|endoftext|' + eot + '>');
add('special', '<|padding|>' + eot + 'x<|padding|> ');
add('special', 'a  ' + eot + '   b');
add('special', '<|endoftext|> <|endofteXt|>');
add('nfc', 'e\u0301');
add('nfc', 'caf\u0065\u0301 na\u0131\u0308ve A\u030a \u212b \u2126 \uFB01');
add('nfc', '\u1100\u1161\u11a8 \uac00 \u0344 \u0958 \u2000 \u2001');
add('nfc', 'x\u0301\u0301 \u0301 e\u0301\u0327');
add('cjk', '日本語のテキストです。中文字符测试，한국어 텍스트.');
add('cjk', '　全角スペース　と「かぎかっこ」１２３');
add('emoji', '👩‍👩‍👧‍👦 family 🏳️‍🌈 flag 👍🏽 thumbs 🇯🇵');
add('emoji', 'emoji👍without space😀😀😀');
add('arabic', 'مرحبا بالعالم! هذا نص عربي ١٢٣.');
add('devanagari', 'नमस्ते दुनिया, यह हिंदी है।');
add('numbers', '3.14159 1,000,000 12345678901234567890 0x1F 1e-9 ¾ ² ① Ⅻ');
add('numbers', '2024-01-01T12:34:56Z $100.00 50% #1 -42');
add('contractions', "DON'T I'M YOU'RE WE'VE SHE'LL HE'D IT'S");
add('contractions', "don't i'm you're we've she'll he'd it's 'tis o'clock rock'n'roll");
add('contractions', "It’s ‘quoted’ and “double” ''s '''");
add('code', 'int main(void) {\n\treturn 0;\n}\n\n    if (x == y) { z += 1; }\n');
add('code', 'def f(x):\n    return x**2  # comment\n\n\n');
add('misc', 'ÀÉÎÕÜ àéîõü ß ẞ Ωμέγα Кириллица ქართული ☃ ∑∫√');
add('misc', '\u0001\u0002\u001f\u007f control');
add('misc', 'a'.repeat(300));
add('misc', '!!!???...,,,;;;:::---___===+++***&&&^^^%%%$$$###@@@');
add('misc', 'http://example.com/path?query=1&b=2#frag mail@example.org');

// chunks of real text
// Slices by code point (Array.from), so no chunk holds a lone surrogate.
function chunks(file, source, count, size) {
  const cps = Array.from(fs.readFileSync(path.join(data, file), 'utf8'));
  const step = Math.floor(cps.length / count);
  for (let i = 0; i < count; i++) add(source, cps.slice(i * step, i * step + size).join(''));
}
chunks('openwebtext_sample.txt', 'openwebtext', 30, 2000);
chunks('wikitext-2_tokens_valid.txt', 'wikitext', 20, 2000);
chunks('tinyshakespeare_input.txt', 'shakespeare', 15, 1500);

(async () => {
  let i = 0;
  for (const c of cases) {
    const enc = await tok.encode(c.text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    process.stdout.write(JSON.stringify({ source: c.source, index: i++, text: c.text, ids }) + '\n');
  }
})();
