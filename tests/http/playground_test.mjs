// The browser playground (GET /) in Debian's Chromium, driven by playwright-core (pinned in
// package.json; it uses /usr/bin/chromium and downloads no browser). Started by
// tests/e2e/http_test.py, which runs the server and passes:
//   DLLM_ORIGIN      http://127.0.0.1:PORT
//   DLLM_TOKEN       the server's bearer token ("auth" scenario)
//   DLLM_SETTINGS    JSON {prompt, max_tokens, block_length, threshold, policy, tau, recent_k,
//                    seed}: what the form is set to
//   DLLM_SCREENSHOT  where to save a PNG of the finished generation (optional)
//   argv[2]          scenario: "page" | "auth" | "presets"
// Prints one JSON line (`RESULT {...}`) with what the page showed, for the Python side to
// compare with dllm-client; exits non-zero on the first failed assertion.
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

import { PRESETS } from "../../server/http/playground/presets.js";

const origin = process.env.DLLM_ORIGIN;
const settings = JSON.parse(process.env.DLLM_SETTINGS ?? "{}");
const scenario = process.argv[2] ?? "page";
const TIMEOUT_MS = 120_000;

async function launch() {
  // Flags as the machine's notes ask: no sandbox as root, and no background networking
  // (this machine's closed network refuses it, which would log errors).
  return chromium.launch({
    executablePath: process.env.DLLM_CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

// Console errors and uncaught exceptions of the page.
function watchErrors(page) {
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(`uncaught: ${e.message}`));
  return errors;
}

async function setKnobs(page, side, s) {
  const fill = async (key, value) => {
    if (value !== undefined) await page.fill(`#${side}-${key}`, String(value));
  };
  if (s.policy !== undefined) await page.selectOption(`#${side}-policy`, s.policy);
  if (s.schedule !== undefined) await page.selectOption(`#${side}-schedule`, s.schedule);
  // The knobs' ids are the request fields' names (GET /v1/dllm/fields), `${side}-${name}`.
  await fill("max_tokens", s.max_tokens);
  await fill("block_length", s.block_length);
  await fill("confidence_threshold", s.threshold);
  await fill("entropy_threshold", s.tau);
  await fill("recent_k", s.recent_k);
  await fill("seed", s.seed);
}

async function generate(page, { keyboard = false } = {}) {
  if (keyboard) {
    await page.focus("#generate");
    await page.keyboard.press("Enter");
  } else {
    await page.click("#generate");
  }
  await page.waitForSelector("#runs[data-state=done]", { timeout: TIMEOUT_MS });
}

// What one run panel shows.
async function panel(page, index) {
  return page.locator(".run").nth(index).evaluate((run) => ({
    state: run.dataset.state,
    error: run.querySelector(".error").hidden ? null : run.querySelector(".error").textContent,
    answer: run.querySelector(".answer").textContent,
    marks: run.querySelectorAll(".strip .mark").length,
    full_marks: run.querySelectorAll(".strip .mark.full").length,
    cells: run.querySelectorAll(".canvas .cell").length,
    masked_cells: run.querySelectorAll(".canvas .cell.masked").length,
    committed_cells: run.querySelectorAll(".canvas .cell.committed").length,
    fixed_cells: run.querySelectorAll(".canvas .cell.fixed").length,
    stats: Object.fromEntries(
      [...run.querySelectorAll(".stats dd")].map((dd) => [dd.dataset.stat, dd.textContent])),
  }));
}

// Opens the page; waits until its model line says `state` ("ready", or "error" when the
// settings could not load).
async function openPage(browser, state) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = watchErrors(page);
  await page.goto(`${origin}/`);
  await page.waitForSelector(`#model-line[data-state=${state}]`, { timeout: TIMEOUT_MS });
  return { page, errors };
}

async function pageScenario(browser) {
  const { page, errors } = await openPage(browser, "ready");
  assert.ok(await page.locator("#auth").isHidden(), "no token asked for on an open server");

  // The page as it opens: Generate without touching anything runs (the default block, 32,
  // is longer than the default answer here, 16: the form clamps it to the answer).
  await generate(page);
  const untouched = await panel(page, 0);
  assert.equal(untouched.state, "done", JSON.stringify(untouched));
  assert.equal(untouched.error, null);

  // One generation through the form, started from the keyboard.
  await page.fill("#prompt", settings.prompt);
  await setKnobs(page, "a", settings);
  await generate(page, { keyboard: true });
  const single = await panel(page, 0);
  assert.equal(single.state, "done", JSON.stringify(single));
  assert.equal(single.error, null);
  assert.equal(single.cells, settings.max_tokens, "one canvas cell per answer position");
  assert.equal(single.masked_cells, 0, "a finished canvas has no masks left (only unused ones)");
  assert.ok(single.committed_cells > 0, "committed tokens shown");
  assert.equal(String(single.marks), single.stats.steps, "one strip mark per step");
  if (process.env.DLLM_SCREENSHOT) {
    await page.screenshot({ path: process.env.DLLM_SCREENSHOT, fullPage: true });
  }

  // Side by side: A as set, B with no cache (every step full).
  await page.check("#compare");
  await setKnobs(page, "b", { ...settings, policy: "none" });
  await generate(page);
  const a = await panel(page, 0);
  const b = await panel(page, 1);
  assert.equal(await page.locator(".run").count(), 2);
  for (const p of [a, b]) {
    assert.equal(p.state, "done", JSON.stringify(p));
    assert.ok(p.marks > 0 && String(p.marks) === p.stats.steps, JSON.stringify(p));
  }
  assert.equal(b.full_marks, b.marks, "no cache: every step is a full step");
  assert.deepEqual(a.answer, single.answer, "side A repeats the single run (same seed)");
  await page.uncheck("#compare");

  assert.deepEqual(errors, [], "console errors");

  // Bad input: the server's own message, in the page. (Chromium reports each refused
  // request as a console error: those two are expected.)
  await page.check("input[name=mode][value=raw]");
  await page.fill("#prompt", "");
  await generate(page);
  const empty = await panel(page, 0);
  assert.equal(empty.state, "error");
  assert.match(empty.error ?? "", /prompt: must not be empty/);
  await page.check("input[name=mode][value=chat]");
  await page.fill("#prompt", settings.prompt);
  await page.fill("#a-confidence_threshold", "2");
  await generate(page);
  const range = await panel(page, 0);
  assert.equal(range.state, "error");
  assert.match(range.error ?? "", /confidence_threshold/);

  // Infill: the template's fixed text is tokenized by the server and shown as fixed cells
  // around the gaps; the canvas sets the answer length. A template without a gap is refused
  // in the page, naming the problem.
  await page.fill("#a-confidence_threshold", String(settings.threshold));
  await page.check("input[name=mode][value=infill]");
  assert.ok(await page.locator("#infill").isVisible());
  await page.fill("#canvas-template", "{{6}} the end.{{4}}");
  await generate(page);
  const infill = await panel(page, 0);
  assert.equal(infill.state, "done", JSON.stringify(infill));
  assert.ok(infill.fixed_cells > 0, JSON.stringify(infill));
  assert.equal(infill.cells, 10 + infill.fixed_cells, "gaps of 6 and 4 around the fixed cells");
  await page.fill("#canvas-template", "no gap here");
  await generate(page);
  const gapless = await panel(page, 0);
  assert.equal(gapless.state, "error");
  assert.match(gapless.error ?? "", /no gap/);
  await page.check("input[name=mode][value=chat]");
  assert.ok(await page.locator("#infill").isHidden());

  // 200% zoom of a 1280-pixel window: nothing needs horizontal scrolling.
  await page.setViewportSize({ width: 640, height: 900 });
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `horizontal overflow of ${overflow} px at 640 px`);

  assert.deepEqual(errors, Array(2).fill(
    "Failed to load resource: the server responded with a status of 400 (Bad Request)"));
  return { single, side_by_side: { a, b } };
}

// The page opens on the served model's first preset; each preset in the menu, generated as
// set, gives the answer presets.js says (the screenshot is of the first, as the page opens).
async function presetsScenario(browser) {
  const { page, errors } = await openPage(browser, "ready");
  const titles = await page.locator("#preset option").allTextContents();
  assert.ok(titles.length > 0, "no preset for this model");
  assert.ok(await page.locator("#preset").isVisible());
  const shown = [];
  for (const [i, title] of titles.entries()) {
    const preset = PRESETS.find((p) => p.title === title);
    assert.ok(preset, `unknown preset ${title}`);
    if (i > 0) await page.selectOption("#preset", String(i));
    assert.equal(await page.inputValue("#prompt"), preset.prompt);
    assert.equal(await page.locator("#infill").isVisible(), Boolean(preset.canvas));
    await generate(page);
    const run = await panel(page, 0);
    assert.equal(run.state, "done", JSON.stringify(run));
    assert.ok(run.answer.includes(preset.answer),
              `preset "${title}": answered ${JSON.stringify(run.answer)}, not ${preset.answer}`);
    if (preset.canvas) {
      // Infill: the template's gaps stand for the masks_for texts' tokens, so the fixed line
      // is in the answer right after as many tokens as the reference lines it replaces.
      const template = await page.inputValue("#canvas-template");
      const gap = "\\{\\{\\d+\\}\\}";
      const escape = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      const shape = preset.canvas.map((p) => (p.fixed ? escape(p.fixed) : gap)).join("");
      assert.match(template, new RegExp(`^${shape}(${gap})?$`), template);
      const fixed = preset.canvas.find((p) => p.fixed).fixed;
      assert.ok(run.answer.includes(fixed), `the fixed text is not in ${JSON.stringify(run.answer)}`);
      assert.ok(run.fixed_cells > 0 && run.fixed_cells < run.cells, JSON.stringify(run));
      assert.equal(run.cells, preset.settings.max_tokens, "the canvas fills max_tokens");
    }
    assert.equal(String(run.marks), run.stats.steps, "one strip mark per step");
    if (i === 0 && process.env.DLLM_SCREENSHOT) {
      await page.screenshot({ path: process.env.DLLM_SCREENSHOT, fullPage: true });
    }
    shown.push({ title, ...run });
  }
  assert.deepEqual(errors, [], "console errors");
  return { presets: shown };
}

async function authScenario(browser) {
  const { page, errors } = await openPage(browser, "error");
  assert.ok(await page.locator("#auth").isVisible(), "the page asks for a token");

  // Without a token the server refuses the generation, and the page says why.
  await page.fill("#prompt", settings.prompt);
  await generate(page);
  const refused = await panel(page, 0);
  assert.equal(refused.state, "error");
  assert.match(refused.error ?? "", /token/i);

  // With it, the settings load and the generation runs.
  await page.fill("#token", process.env.DLLM_TOKEN);
  await page.dispatchEvent("#token", "change");
  await page.waitForSelector("#model-line[data-state=ready]", { timeout: TIMEOUT_MS });
  await setKnobs(page, "a", settings);
  await generate(page);
  const accepted = await panel(page, 0);
  assert.equal(accepted.state, "done", JSON.stringify(accepted));
  assert.equal(accepted.error, null);
  // The only console errors are the browser's reports of the refused (401) requests.
  for (const e of errors) assert.match(e, /401/, `unexpected console error: ${e}`);
  return { refused, accepted };
}

const browser = await launch();
try {
  const scenarios = { page: pageScenario, auth: authScenario, presets: presetsScenario };
  assert.ok(scenarios[scenario], `unknown scenario ${scenario}`);
  const result = await scenarios[scenario](browser);
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}
