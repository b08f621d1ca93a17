// Seeded generator of the tokenizer parity corpus: varied strings that exercise every branch
// of the split regexes, NFC, byte-level BPE and added-token matching. Deterministic for a
// given seed, so the committed corpus can be regenerated bit for bit.

// mulberry32: a tiny, well-known 32-bit PRNG; good enough for test-input variety.
export function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)); // inclusive
  const pick = (arr) => arr[Math.floor(next() * arr.length)];
  return { next, int, pick };
}

const WORDS = (
  "the of and to in is you that it he was for on are as with his they at be this have from " +
  "or one had by word but not what all were we when your can said there use an each which " +
  "she do how their if will up other about out many then them these so some her would make " +
  "like him into time has look two more write go see number no way could people my than " +
  "first water been call who oil its now find long down day did get come made may part " +
  "diffusion model token cache entropy mask transformer attention gradient tensor server"
).split(" ");

const CONTRACTIONS = [
  "I'll", "DON'T", "we've", "She'S", "they're", "I'm", "he'd", "it's", "You'RE", "can't",
  "WON'T", "y'all", "o'clock", "rock'n'roll", "'tis", "it’s", "don’t", "'s", "'LL", "'Ve",
  "'M", "'D", "''", "'", "l'homme", "aujourd'hui",
];

const PUNCT = [".", ",", "!", "?", ";", ":", "...", " - ", " -- ", "(", ")", "\"", "«", "»", "—",
  "–", "…", "¿", "¡", "/", "\\", "@", "#", "$", "%", "&", "*", "+", "=", "~", "`", "^", "|", "_"];

const SPECIALS = ["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|eot_id|>",
  "<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>", "<|mask|>", "<|beginoftext|>",
  "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|reserved_special_token_5|>", "<|im_",
  "<|eot_id", "<|im_end|>>", "<<|im_end|>", "|>", "<|", "<think>", "<|vision_pad|>",
  "<|file_sep|>"];

const EMOJI = ["😀", "😂", "🤖", "🚀", "❤️", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "✨", "🔥", "🎉",
  "🧠", "👩🏻‍💻", "☕", "⚡", "🐍", "🦀", "1️⃣", "©", "®", "™", "♥", "★", "→", "∑", "∞", "≠", "√"];

// Blocks whose characters have been assigned since Unicode 6 or earlier, so every Unicode
// version involved (PCRE2, utf8proc, ICU) agrees on their categories and normalisation.
const BLOCKS = [
  [0x00c0, 0x00ff], [0x0100, 0x017e], [0x0391, 0x03a9], [0x03b1, 0x03c9], [0x0400, 0x04ff],
  [0x05d0, 0x05ea], [0x0620, 0x064a], [0x0660, 0x0669], [0x0905, 0x0939], [0x0966, 0x096f],
  [0x0e01, 0x0e30], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3],
  [0x2070, 0x2079], [0x2160, 0x216f], [0xff10, 0xff19], [0xff21, 0xff3a], [0x2000, 0x200a],
  [0x0300, 0x036f], [0x1100, 0x1112], [0x1161, 0x1175],
];

const CJK_PUNCT = ["，", "。", "、", "！", "？", "：", "「", "」", "（", "）", "　"];

const CODE = [
  "def f(x):\n    return x * 2\n",
  "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
  "const re = /\\p{L}+/gu;\nconsole.log(\"hi\");",
  "#include <vector>\nint main() { return 0; }\n",
  "if x == 1 and y != 2:\n        pass\n\n\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
  "    \n    \n",
  "x=[i**2 for i in range(10)]  # squares",
  "fn main() -> Result<(), Box<dyn Error>> {\r\n    Ok(())\r\n}\r\n",
  "<div class=\"a\">&nbsp;&lt;tag&gt;</div>",
  "$ ls -la /usr/bin | grep '^-rwx' > out.txt 2>&1",
  "a\t\tb\t\t\tc",
  "    def __init__(self):\n        self._x = None",
];

const WHITESPACE = [" ", "  ", "   ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n",
  "\r\n\r\n", " \n", "\n ", " \t \n", "\u00a0", "\u3000", "\u2009", "\u0085", "\u2028", "\r",
  "\u000b", "\u000c", " \r\n  "];

function word(rng) {
  const w = rng.pick(WORDS);
  const r = rng.next();
  if (r < 0.1) return w.toUpperCase();
  if (r < 0.3) return w[0].toUpperCase() + w.slice(1);
  return w;
}

function prose(rng, n) {
  const parts = [];
  for (let i = 0; i < n; ++i) {
    parts.push(word(rng));
    if (rng.next() < 0.15) parts.push(rng.pick(PUNCT));
  }
  return parts.join(" ") + rng.pick([".", "!", "?", "", "\n"]);
}

function fromBlocks(rng, n) {
  let s = "";
  for (let i = 0; i < n; ++i) {
    const [lo, hi] = rng.pick(BLOCKS);
    const cp = rng.int(lo, hi);
    // ſ (U+017F) and the Kelvin sign case-fold to ASCII; the engines' (?i:) differ on them.
    if (cp === 0x017f) continue;
    s += String.fromCodePoint(cp);
  }
  return s;
}

function cjk(rng) {
  let s = "";
  const n = rng.int(1, 30);
  for (let i = 0; i < n; ++i) {
    const r = rng.next();
    if (r < 0.6) s += String.fromCodePoint(rng.int(0x4e00, 0x9fa5));
    else if (r < 0.7) s += String.fromCodePoint(rng.int(0x3041, 0x3096));
    else if (r < 0.8) s += String.fromCodePoint(rng.int(0xac00, 0xd7a3));
    else if (r < 0.9) s += rng.pick(CJK_PUNCT);
    else s += rng.pick([" ", word(rng), String(rng.int(0, 999))]);
  }
  return s;
}

function digits(rng) {
  const r = rng.next();
  if (r < 0.3) {
    let s = "";
    for (let i = rng.int(1, 60); i > 0; --i) s += String(rng.int(0, 9));
    return s;
  }
  if (r < 0.5) return `${rng.int(0, 99999)}.${rng.int(0, 9999)} ${rng.int(1, 12)}/${rng.int(1, 28)}/${rng.int(1900, 2100)}`;
  if (r < 0.7) return `${rng.int(1, 999)},${String(rng.int(0, 999)).padStart(3, "0")},${String(rng.int(0, 999)).padStart(3, "0")} and ${rng.int(-500, 500)}%`;
  if (r < 0.85) return `x${rng.int(0, 9)}² + ${rng.int(1, 9)}½ = Ⅻ ٣٤٥ १२३ ５６`;
  return `${prose(rng, 3)} ${rng.int(0, 1e9)}${rng.pick(["", "th", "km", "ms", "GB"])}`;
}

function whitespace(rng) {
  let s = "";
  for (let i = rng.int(1, 10); i > 0; --i) {
    s += rng.next() < 0.5 ? rng.pick(WHITESPACE) : word(rng);
  }
  return s;
}

function contractions(rng) {
  const parts = [];
  for (let i = rng.int(1, 8); i > 0; --i) {
    parts.push(rng.next() < 0.5 ? rng.pick(CONTRACTIONS) : word(rng));
  }
  return parts.join(rng.pick([" ", "  ", "", "\n"]));
}

function specials(rng) {
  let s = "";
  for (let i = rng.int(1, 8); i > 0; --i) {
    const r = rng.next();
    if (r < 0.4) s += rng.pick(SPECIALS);
    else if (r < 0.6) s += rng.pick(WHITESPACE);
    else if (r < 0.8) s += word(rng);
    else s += fromBlocks(rng, rng.int(1, 4));
  }
  return s;
}

function emoji(rng) {
  let s = "";
  for (let i = rng.int(1, 10); i > 0; --i) {
    const r = rng.next();
    if (r < 0.6) s += rng.pick(EMOJI);
    else if (r < 0.8) s += " " + word(rng);
    else s += rng.pick(WHITESPACE);
  }
  return s;
}

function nfc(rng) {
  // Decomposed forms that NFC composes, and forms that NFC maps to other characters.
  const pieces = ["e\u0301", "a\u0308", "o\u0302\u0323", "\u212b", "\u2126", "n\u0303",
    "\u1100\u1161\u11a8", "\u0041\u030a", "\u00c5", "c\u0327a", "\u0344", "\u1e9b\u0323",
    "\ufb01", "\u2460", "ｶ"];
  let s = "";
  for (let i = rng.int(1, 8); i > 0; --i) s += rng.next() < 0.6 ? rng.pick(pieces) : word(rng) + " ";
  return s;
}

function mixed(rng) {
  const gens = [prose, cjk, digits, whitespace, contractions, specials, emoji, nfc];
  let s = "";
  for (let i = rng.int(2, 6); i > 0; --i) {
    const g = rng.pick(gens);
    s += g === prose ? prose(rng, rng.int(1, 10)) : g(rng);
    if (rng.next() < 0.3) s += fromBlocks(rng, rng.int(1, 6));
  }
  return s;
}

function chat(rng) {
  const user = prose(rng, rng.int(3, 20));
  if (rng.next() < 0.5) {
    return `<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`;
  }
  return `<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n${user.trim()}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`;
}

export function makeCorpus(seed = 20261130) {
  const rng = makeRng(seed);
  const corpus = ["", " ", "\n", "  \n\n", "a", "Hello world", "Hello, world!", "\u00a0",
    "<|im_end|>", "<|eot_id|>", "  leading and trailing  ", "\r\n\r\n",
    // Unicode White_Space corner cases: NEL (U+0085) is whitespace; U+FEFF is not; U+180E
    // stopped being whitespace in Unicode 6.3 (PCRE2's \s still matches it).
    "end.\u0085next", "x!\u0085\u0085 y", "\u0085", "a\u0085", "?!\u0085\n", "(\u0085)",
    "\ufeffBOM text", "mongolian\u180evowel", "line\u2028sep\u2029para", "\u3000\u3000x",
    "tab\t\u0085\tend", "!!\u00a0!!", "\u000b\u000c\u001c\u001d", "1\u00852",
    "stop!\u180e", "a.\u180e\u180e b", "\u180e \u180e", "x \u180e\n", "(\u180e)?", "word \u180eword",
    "two  \u180esep",
    // Llama-3 vocabulary entries that its merges cannot build (ignore_merges picks them whole).
    " việc", "Tiếng Việt có nhiều điều hợp lý ngoài nhiên", "jeho ektedir, gelmektedir",
    "در ایران", "geldıldı",
  ];
  const plan = [
    [() => prose(rng, rng.int(1, 40)), 400],
    [() => cjk(rng), 250],
    [() => digits(rng), 200],
    [() => whitespace(rng), 250],
    [() => code(rng), 150],
    [() => contractions(rng), 200],
    [() => specials(rng), 250],
    [() => emoji(rng), 150],
    [() => nfc(rng), 120],
    [() => fromBlocks(rng, rng.int(1, 40)), 200],
    [() => mixed(rng), 300],
    [() => chat(rng), 80],
  ];
  for (const [gen, count] of plan) {
    for (let i = 0; i < count; ++i) corpus.push(gen());
  }
  // A few long inputs stress the regex (long whitespace/digit/letter runs) and BPE cache.
  corpus.push(" ".repeat(3000) + "x");
  corpus.push("9".repeat(2000));
  corpus.push("a".repeat(1500) + "\n".repeat(500));
  let long = "";
  while (long.length < 8000) long += mixed(rng);
  corpus.push(long);
  return corpus;
}

function code(rng) {
  let s = rng.pick(CODE);
  if (rng.next() < 0.5) s += rng.pick(CODE);
  if (rng.next() < 0.3) s = s.replace(/ {4}/g, "\t");
  return s;
}
