// The playground's presets: prompts and settings that show what the method does on the model
// the server has loaded. The page opens on the first preset whose `models` matches the
// served model's name; the menu lists every matching one. Each title says what it shows,
// and `answer` is what the model answers (tests/http/playground_test.mjs checks it on the
// shipped models, so a preset that stops being answered right fails a test). A preset with a
// `canvas` opens the infill mode: its pieces ({fixed: TEXT} or {masks_for: TEXT}, a gap of
// as many tokens as TEXT) become the answer canvas's template, masks filling it up to
// max_tokens (canvas_template.js).
//
// The cot models (models/llada-cot, models/dream-cot) hesitate like large dLLMs: few-shot
// step-by-step arithmetic, with tokens committed above 0.5 nats in about 40% of the steps.
// Their traces have the entropy peaks that τ acts on. The prompts are val-split items of
// tools/tasks/data_cot, sent as one user message through the chat template (as dllm-bench
// does).

// EntropyCache at the setting the tuning protocol picked on the cot models' val split
// (docs/paper-comparison.md): window 16, confidence threshold 0.9, τ 1 nat, recent k 16.
const COT_SETTINGS = { max_tokens: 160, schedule: "window", window: 16, confidence_threshold: 0.9, policy: "entropy", entropy_threshold: 1, recent_k: 16 };

export const PRESETS = [
  {
    title: "Long addition, carry by carry: entropy peaks where the model hesitates, and each peak above τ refreshes the cache",
    models: /-cot$/,
    prompt: "Q: What is 831352 + 56072?\nA: 831352+056072\n2 + 2 + 0 = 04, write 4 carry 0\n5+7+0=12, write 2 carry 1\n3 + 0 + 1 = 04; carry 0, write 4\n1 + 6 + 0 = 07; write 7, carry 0\n3+5+0=08, carry 0, write 8\n8+0+0=08 -> carry 0, write 8\nwrite the carry 0\n#### 0887424\n\nQ: What is 1351 + 2625?\nA: 1351 + 2625\n1 + 5 + 0 = 06 -> write 6 carry 0\n5+2+0 is 07; write 7, carry 0\n3+6+0=09; write 9 carry 0\n1+2+0=03, carry 0, write 3\nwrite the carry 0\n#### 03976\n\nQ: What is 744052 + 5703?",
    answer: "#### 0749755",
    settings: COT_SETTINGS,
  },
  {
    title: "Subtraction with borrows: a harder trace, more peaks above τ",
    models: /-cot$/,
    prompt: "Q: What is 541434 - 12085?\nA: 541434 - 012085\n4 - 5 - 0 + 10 = 9; borrow 1, write 9\n3-8-1+10=4, borrow 1, write 4\n4-0-1+00=3; borrow 0, write 3\n1-2-0+10 is 9; write 9 borrow 1\n4-1-1+00=2; write 2 borrow 0\n5 - 0 - 0 + 00 = 5; borrow 0, write 5\n#### 529349\n\nQ: What is 8594 - 4148?\nA: 8594-4148:\n4 - 8 - 0 + 10 = 6 -> borrow 1, write 6\n9-4-1+00=4; borrow 0, write 4\n5-1-0+00=4, write 4 borrow 0\n8-4-0+00=4, borrow 0, write 4\n#### 4446\n\nQ: What is 9867 - 5778?",
    answer: "#### 4089",
    settings: COT_SETTINGS,
  },
  {
    title: "Infill: one line of the addition fixed mid-answer; the model writes the lines before it to fit its place, then the rest",
    models: /-cot$/,
    prompt: "Q: What is 831352 + 56072?\nA: 831352+056072\n2 + 2 + 0 = 04, write 4 carry 0\n5+7+0=12, write 2 carry 1\n3 + 0 + 1 = 04; carry 0, write 4\n1 + 6 + 0 = 07; write 7, carry 0\n3+5+0=08, carry 0, write 8\n8+0+0=08 -> carry 0, write 8\nwrite the carry 0\n#### 0887424\n\nQ: What is 1351 + 2625?\nA: 1351 + 2625\n1 + 5 + 0 = 06 -> write 6 carry 0\n5+2+0 is 07; write 7, carry 0\n3+6+0=09; write 9 carry 0\n1+2+0=03, carry 0, write 3\nwrite the carry 0\n#### 03976\n\nQ: What is 744052 + 5703?",
    // A gap as long as these reference lines, the fixed line, then masks to max_tokens.
    canvas: [
      { masks_for: "744052+005703\n2+3+0=05, write 5 carry 0\n5 + 0 + 0 = 05; write 5, carry 0\n0+7+0=07 -> carry 0, write 7\n" },
      { fixed: "4 + 5 + 0 = 09; write 9 carry 0\n" },
    ],
    answer: "#### 0749755",
    settings: COT_SETTINGS,
  },
  {
    title: "Reversing a long digit string: near-certain copying, long runs of partial steps",
    models: /-cot$/,
    prompt: "Q: Reverse the string 2807566389157272740066650809449182687074.\nA: 1: 9182687074 is 4707862819\n6665080944 is 4490805666\n3: 1572727400 is 0047272751\n2807566389 is 9836657082\n#### 4707862819449080566600472727519836657082\n\nQ: Reverse the string 333462114523550667298271180661.\nA: 1: 8271180661 -> 1660811728\n2: 2355066729: 9276605532\n3334621145 -> 5411264333\n#### 166081172892766055325411264333\n\nQ: Reverse the string 686784139936956761333508923931.",
    answer: "#### 139329805333167659639931487686",
    settings: COT_SETTINGS,
  },
  {
    title: "Reverse a word list (the tiny models' task suite)",
    models: /-tiny$/,
    prompt: "Say these words backwards: sun cat hat",
    answer: "hat cat sun",
    settings: { max_tokens: 16, policy: "entropy" },
  },
  {
    title: "Sort three numbers (the tiny models' task suite)",
    models: /-tiny$/,
    prompt: "Sort these numbers: 7 1 6",
    answer: "1 6 7",
    settings: { max_tokens: 16, policy: "entropy" },
  },
];

// The presets for the model named `model` (model_info's "model"), first the default.
export function presetsFor(model) {
  return PRESETS.filter((p) => p.models.test(model));
}
