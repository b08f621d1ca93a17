// The playground's page logic: builds the decoding and cache knobs from the server's table of
// request fields (GET /v1/dllm/fields), fills them from the served model's defaults and
// limits (GET /v1/dllm/model_info), and streams one or two generations with per-step events
// ("stream_options": {"include_steps": true}).
// Values are sent as typed: the server validates them and its message is shown verbatim.

import { buildCanvas, presetTemplate } from "./canvas_template.js";
import { ApiError, getJson, postEvents } from "./sse.js";
import { presetsFor } from "./presets.js";
import { RunView } from "./run_view.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "dllm-playground-token";

// The fields kept in view; the others (read by every schedule or policy, or by the timestep
// schedule only, and rarely changed) go under "More settings". A cache policy's own knobs
// stay in view too, so a field added to the table for a policy shows up next to it.
const IN_VIEW = new Set(["schedule", "steps", "block_length", "window", "confidence_threshold",
                         "temperature", "seed", "policy"]);
const inView = (f) => IN_VIEW.has(f.name) || f.policies.length > 0;

let token = sessionStorage.getItem(TOKEN_KEY) ?? "";
let fields = null;       // the table of /v1/dllm/fields, once loaded
let fieldsLoad = null;   // its request in flight (or done), so that a reload asks only once
let info = null;
let running = null;  // AbortController of the generations in flight
let promptTyped = false;  // the user has edited the prompt: presets no longer replace it
let templateLoad = null;  // a preset's canvas template being written (infill presets)

function knob(side, name) {
  return $(`${side}-${name}`);
}

// "confidence_threshold" -> "Confidence threshold", with the unit: "Recent k (tokens)"
// (but "Steps", not "Steps (steps)").
function labelText(f) {
  const words = f.name.replaceAll("_", " ");
  const text = words[0].toUpperCase() + words.slice(1);
  return f.unit && !words.endsWith(f.unit) ? `${text} (${f.unit})` : text;
}

// The number input's step: fine for fields within [-1, 1] (thresholds, fractions).
function stepOf(f) {
  if (f.type !== "float") return "1";
  const small = f.min !== null && f.max !== null && f.min >= -1 && f.max <= 1;
  return small ? "0.05" : "0.1";
}

// One <label> holding a knob's input (or <select>) with id `${side}-${name}`.
function knobLabel(side, name, text, help, select) {
  const label = document.createElement("label");
  label.dataset.knob = name;
  label.append(text);
  if (help) label.title = help;
  const input = document.createElement(select ? "select" : "input");
  input.id = `${side}-${name}`;
  input.name = `${side}-${name}`;
  if (!select) {
    input.type = "number";
    input.step = "1";
    input.inputMode = "decimal";
  }
  input.addEventListener("change", () => updateRelevance(side));
  label.append(input);
  return label;
}

// The answer length is a top-level request field (max_tokens), not one of the table's.
function buildAnswerLength(side) {
  const label = knobLabel(side, "max_tokens", "Answer length (tokens)",
                          "max_tokens: the answer canvas length, one cell per token");
  $(`settings-${side}`).append(label);
  knob(side, "max_tokens").min = "1";
}

function buildKnobs(side) {
  const fieldset = $(`settings-${side}`);
  const more = document.createElement("details");
  more.className = "more";
  const summary = document.createElement("summary");
  summary.textContent = "More settings";
  const moreKnobs = document.createElement("div");
  moreKnobs.className = "more-knobs";
  more.append(summary, moreKnobs);
  for (const f of fields) {
    const help = `${f.section}.${f.name}: ${f.doc}. Range ${f.domain}${f.unit ? ` ${f.unit}` : ""}.`;
    const label = knobLabel(side, f.name, labelText(f), help, f.type === "enum");
    const input = label.querySelector("input, select");
    if (f.type === "enum") {
      setOptions(input, f.choices, f.default);
    } else {
      input.step = stepOf(f);
      if (f.min !== null) input.min = String(f.min);
      if (f.max !== null) input.max = String(f.max);
      input.value = numberText(f, f.default);
    }
    (inView(f) ? fieldset : moreKnobs).append(label);
  }
  fieldset.append(more);
  updateRelevance(side);
}

// A float field's value as the server writes it: the table's defaults are doubles of floats
// (0.0010000000474974513), shown as the shortest text of the same float (0.001).
function floatText(x) {
  for (let digits = 1; digits < 17; ++digits) {
    const text = String(Number(x.toPrecision(digits)));
    if (Math.fround(Number(text)) === Math.fround(x)) return text;
  }
  return String(x);
}

// A number field's text: "" when it has no value.
function numberText(f, x) {
  if (x === null || x === undefined) return "";
  return f.type === "float" && typeof x === "number" ? floatText(x) : String(x);
}

function setOptions(select, values, selected) {
  select.replaceChildren(...values.map((v) => new Option(v, v, false, v === selected)));
}

// A field matters when the side's schedule and cache policy read it, and a quota-only field
// (steps) also needs quota decoding (the timestep schedule, or threshold 0); the others are
// greyed out and not sent (the server refuses a knob its decoding would ignore).
function relevant(side, f) {
  const reads = (list, name) => list.length === 0 || list.includes(knob(side, name)?.value);
  const quota = () => knob(side, "schedule")?.value === "timestep" ||
                      !(Number(knob(side, "confidence_threshold")?.value) > 0);
  return reads(f.schedules, "schedule") && reads(f.policies, "policy") &&
         (!f.quota_only || quota());
}

function updateRelevance(side) {
  for (const f of fields ?? []) {
    knob(side, f.name).closest("label").classList.toggle("off", !relevant(side, f));
  }
}

// A proto enum name from model_info ("SCHEDULE_BLOCK", "REMASKING_LOW_CONFIDENCE") as the
// field's choice ("block", "low_confidence"); undefined when none (UNSPECIFIED).
function choiceOf(f, protoName) {
  const name = String(protoName ?? "").toLowerCase();
  const matches = f.choices.filter((c) => name === c || name.endsWith(`_${c}`));
  return matches.sort((x, y) => y.length - x.length)[0];
}

// Fills one side from the server's defaults (the field's own default where the model info
// has none) and its limits as hints; side B compares with no cache.
function applyDefaults(side, model) {
  const defaults = { decoding: model.default_decoding ?? {}, cache: model.default_cache ?? {} };
  const limits = model.limits ?? {};
  const policyField = fields.find((f) => f.name === "policy");
  const allowed = (limits.allowed_cache_policies ?? []).map((p) => choiceOf(policyField, p))
                                                        .filter(Boolean);
  for (const f of fields) {
    const input = knob(side, f.name);
    // The knobs of policies this server does not allow could never be used: not shown.
    input.closest("label").hidden = f.policies.length > 0 &&
                                    !f.policies.some((p) => allowed.includes(p));
    const given = defaults[f.section]?.[f.name];
    if (f.type === "enum") {
      const value = choiceOf(f, given) ?? f.default;
      if (f.name === "policy") {
        const prefer = side === "a" ? "entropy" : "none";
        const policy = allowed.includes(prefer) ? prefer
                     : allowed.includes(value) ? value : allowed[0];
        setOptions(input, allowed, policy);
      } else {
        setOptions(input, f.choices, value);
      }
      continue;
    }
    // Proto JSON writes int64/uint64 as strings: the text is kept as is (a seed above 2^53
    // would lose bits as a number).
    input.value = numberText(f, given ?? f.default);
    // The limits as hints; the form does not enforce them (novalidate): the server does.
    const limit = f.limit ? Number(limits[f.limit]) : 0;
    if (limit > 0) input.max = String(limit);
  }
  const maxTokens = knob(side, "max_tokens");
  maxTokens.value = String(Math.min(model.default_max_new_tokens || 32,
                                    limits.max_new_tokens || 1e9));
  if (limits.max_new_tokens) maxTokens.max = String(limits.max_new_tokens);
  updateRelevance(side);
}

function mode() {
  return document.querySelector("input[name=mode]:checked").value;
}

// Infill mode: the canvas template is shown, and it sets the answer length (the knob is off).
function setMode(value) {
  document.querySelector(`input[name=mode][value=${value}]`).checked = true;
  updateMode();
}

function updateMode() {
  const infill = mode() === "infill";
  $("infill").hidden = !infill;
  for (const side of ["a", "b"]) {
    knob(side, "max_tokens").closest("label").classList.toggle("off", infill);
  }
}

// Sets the prompt and both sides from a preset (presets.js): side A as the preset says, side
// B the same decoding with no cache. Settings the preset leaves out keep the model's defaults.
// An infill preset's canvas becomes the template once the server has tokenized its text.
function applyPreset(preset) {
  $("prompt").value = preset.prompt;
  setMode(preset.canvas ? "infill" : "chat");
  if (preset.canvas) {
    templateLoad = presetTemplate(preset.canvas, preset.settings.max_tokens, token)
      .then((text) => { $("canvas-template").value = text; })
      .finally(() => { templateLoad = null; });
  }
  for (const side of ["a", "b"]) {
    applyDefaults(side, info);
    for (const [name, v] of Object.entries(preset.settings)) {
      const input = knob(side, name);
      if (!input) continue;
      const text = side === "b" && name === "policy" ? "none" : String(v);
      // A policy or schedule this server does not offer stays at its default.
      if (input.tagName !== "SELECT" || [...input.options].some((o) => o.value === text)) {
        input.value = text;
      }
    }
    updateRelevance(side);
  }
}

// The presets for the served model in the menu; the first applied (which sets both sides),
// unless the user has typed a prompt already (the model info loads again when a token is
// entered): then both sides get the model's defaults. True when a preset was applied.
function applyPresets(model) {
  const presets = presetsFor(model.model ?? "");
  const menu = $("preset");
  menu.replaceChildren(...presets.map((p, i) => new Option(p.title, String(i))));
  menu.closest("label").hidden = presets.length === 0;
  menu.onchange = () => applyPreset(presets[Number(menu.value)]);
  if (presets.length === 0 || promptTyped) return false;
  applyPreset(presets[0]);
  return true;
}

function applyInfo(model) {
  info = model;
  if (!applyPresets(model)) {
    for (const side of ["a", "b"]) applyDefaults(side, model);
  }
  const l = model.limits ?? {};
  $("model-line").textContent =
    `${model.model} (${model.family}, ${model.num_layers} layers, vocabulary ${model.vocab_size}, ` +
    `${model.backend} backend). Limits: ${l.max_new_tokens} answer tokens, block ≤ ` +
    `${l.max_block_length}, window ≤ ${l.max_window}, temperature ≤ ${l.max_temperature}.`;
}

// The table of fields needs no token: it is loaded once and builds both sides' knobs (with
// the engine's defaults until the model info, which may wait for a token, fills them).
function loadFields() {
  fieldsLoad ??= getJson("/v1/dllm/fields", token).then(
    (table) => {
      fields = table.fields;
      buildKnobs("a");
      buildKnobs("b");
    },
    (e) => {
      fieldsLoad = null;  // asked again on the next load (a new token)
      throw e;
    });
  return fieldsLoad;
}

async function loadInfo() {
  try {
    const [, model] = await Promise.all([loadFields(), getJson("/v1/dllm/model_info", token)]);
    applyInfo(model);
    $("auth").hidden = !token;
    $("model-line").dataset.state = "ready";
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      $("auth").hidden = false;
      $("auth-help").textContent = token
        ? `The server refused this token: ${e.message}`
        : "This server requires a bearer token: enter it to load the model's settings.";
      $("model-line").textContent = "Waiting for a bearer token.";
    } else {
      $("model-line").textContent = `Cannot load the model's settings: ${e.message}`;
    }
    $("model-line").dataset.state = "error";
  }
}

// A knob's value as sent: undefined when empty (the server's default applies; for an
// optional field such as shadow_sample_rate, unset is a value of its own). Numbers when they
// parse, else the text as typed (the server names the field and says what is wrong with it).
// A uint64 (the seed) is a number only while it is a safe integer: a larger JSON number
// would reach the server rounded, so it goes as text and the server says so rather than
// running with another seed.
function value(side, name, type) {
  const raw = knob(side, name).value.trim();
  if (raw === "") return undefined;
  if (type === "enum") return raw;
  const n = Number(raw);
  if (!Number.isFinite(n)) return raw;
  if (type === "uint64" && !Number.isSafeInteger(n)) return raw;
  return n;
}

// A block longer than the answer means one block of the whole answer, but the server refuses
// it (block_length must divide max_new_tokens) rather than guess. The form's default block is
// often longer than a short answer, so it is clamped to the answer length here: the same
// canvas as the server's own default shortened to the answer, and the run title says so.
function clampBlock(body) {
  const d = body.decoding;
  const answer = body.max_tokens ?? info?.default_max_new_tokens;
  if (d.schedule === "block" && Number.isInteger(d.block_length) && Number.isInteger(answer) &&
      answer > 0 && d.block_length > answer) {
    d.block_length = answer;
  }
}

// `canvas`: the infill mode's seeded canvas (buildCanvas), else null.
function requestBody(side, canvas) {
  const chat = mode() !== "raw";
  const prompt = $("prompt").value;
  const body = {
    model: info?.model ?? "",
    stream: true,
    stream_options: { include_steps: true },
    decoding: {},
    cache: {},
  };
  const maxTokens = canvas ? canvas.ids.length : value(side, "max_tokens", "int32");
  if (maxTokens !== undefined) body.max_tokens = maxTokens;
  if (canvas) body.canvas = canvas.ids;
  for (const f of fields ?? []) {
    if (!relevant(side, f)) continue;
    const v = value(side, f.name, f.type);
    if (v !== undefined) (body[f.section] ??= {})[f.name] = v;
  }
  clampBlock(body);
  if (chat) body.messages = [{ role: "user", content: prompt }];
  else body.prompt = prompt;
  return { path: chat ? "/v1/chat/completions" : "/v1/completions", body };
}

// "A: block block_length=16 confidence_threshold=0, entropy entropy_threshold=0.3
// recent_k=8": the schedule and policy with the fields only they read, as sent. (The fields'
// aliases are shorter, but some are single letters that say little out of a command line.)
function title(side, body) {
  const d = body.decoding;
  const c = body.cache;
  const knobs = (section, key) => (fields ?? [])
    .filter((f) => f.section === section && f[key].length > 0 && body[section][f.name] !== undefined)
    .map((f) => ` ${f.name}=${body[section][f.name]}`)
    .join("");
  const schedule = d.schedule ?? "default schedule";
  const policy = c.policy ?? "default cache";
  return `${side.toUpperCase()}: ${schedule}${knobs("decoding", "schedules")}, ` +
         `${policy}${knobs("cache", "policies")}`;
}

async function run(side, view, request, signal) {
  try {
    for await (const data of postEvents(request.path, request.body, token, signal)) {
      if (data === "[DONE]") break;
      const event = JSON.parse(data);
      if (event.error) {
        view.onError(event.error.message);
      } else if (event.object === "dllm.step") {
        view.onStep(event);
      } else if (event.choices?.[0]?.finish_reason != null || event.usage) {
        view.onFinal(event);
      } else {
        const choice = event.choices?.[0] ?? {};
        const text = choice.delta?.content ?? choice.text ?? "";
        if (text) view.onDelta(text);
      }
    }
  } catch (e) {
    if (e.name === "AbortError") {
      view.onError("Stopped.");
    } else {
      view.onError(e.message);
      if (e instanceof ApiError && e.status === 401) {
        $("auth").hidden = false;
        $("token").focus();
      }
    }
  } finally {
    view.flush();
  }
}

// The infill mode's canvas, or null in the other modes. Throws when it cannot be built.
async function infillCanvas() {
  if (mode() !== "infill") return null;
  await templateLoad;
  return buildCanvas($("canvas-template").value, info?.mask_token_id, token);
}

async function generate(event) {
  event.preventDefault();
  if (running) return;
  const sides = $("compare").checked ? ["a", "b"] : ["a"];
  const runs = $("runs");
  runs.replaceChildren();
  runs.dataset.state = "running";
  running = new AbortController();
  $("generate").disabled = true;
  $("stop").disabled = false;
  let canvas = null;
  let failed = null;
  try {
    canvas = await infillCanvas();
  } catch (e) {
    failed = e.message;
  }
  const requests = sides.map((side) => requestBody(side, canvas));
  const views = sides.map((side, i) => {
    const asked = requests[i].body.max_tokens ?? info?.default_max_new_tokens;
    const length = Number.isInteger(asked) && asked > 0 ? Math.min(asked, 4096) : 0;
    return new RunView(runs, title(side, requests[i].body), length, canvas?.cells);
  });
  if (failed !== null) {
    for (const view of views) {
      view.onError(failed);
      view.flush();
    }
  } else {
    await Promise.all(sides.map((side, i) => run(side, views[i], requests[i], running.signal)));
  }
  running = null;
  $("generate").disabled = false;
  $("stop").disabled = true;
  runs.dataset.state = "done";
}

function init() {
  buildAnswerLength("a");
  buildAnswerLength("b");
  $("token").value = token;
  $("token").addEventListener("change", () => {
    // The browser fires "change" again when the field loses focus; reloading then would reset
    // every knob the user has set since (and race a generation started meanwhile).
    const next = $("token").value.trim();
    if (next === token) return;
    token = next;
    sessionStorage.setItem(TOKEN_KEY, token);
    loadInfo();
  });
  $("compare").addEventListener("change", () => {
    $("settings-b").hidden = !$("compare").checked;
  });
  $("prompt").addEventListener("input", () => { promptTyped = true; });
  for (const radio of document.querySelectorAll("input[name=mode]")) {
    radio.addEventListener("change", updateMode);
  }
  $("form").addEventListener("submit", generate);
  $("stop").addEventListener("click", () => running?.abort());
  loadInfo();
}

init();
