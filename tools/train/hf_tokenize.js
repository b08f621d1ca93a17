// Encodes lines with the Hugging Face `tokenizers` library (Rust, npm package `tokenizers`)
// to cross-check tools/train/bpe.py. Usage:
//   NODE_PATH=<dir with node_modules> node hf_tokenize.js <tokenizer.json> <texts.jsonl> <out.jsonl>
// texts.jsonl: one JSON string per line. Output: one JSON id list per line
// (add_special_tokens = false, as the reference generate.py encodes chat-rendered prompts).
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
async function main() {
  const [tjPath, inPath, outPath] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tjPath);
  const lines = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length);
  const out = [];
  for (const l of lines) {
    const enc = await tok.encode(JSON.parse(l), null, { addSpecialTokens: false });
    const ids = enc.getIds();
    const dec = await tok.decode(ids, false);
    out.push(JSON.stringify({ ids: Array.from(ids), decoded: dec }));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
}
main().catch((e) => { console.error(e); process.exit(1); });
