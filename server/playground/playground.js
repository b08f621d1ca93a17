// The playground's page logic: loads the served model's defaults and limits
// (GET /v1/dllm/model_info), builds the decoding and cache knobs, and streams one or two
// generations with per-step events ("stream_options": {"include_steps": true}).
// Values are sent as typed: the server validates them and its message is shown verbatim.

import { ApiError, getJson, postEvents } from "./sse.js";
import { RunView } from "./run_view.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "dllm-playground-token";

// proto enum name -> the name requests use.
const lower = (name, prefix) => name.replace(prefix, "").toLowerCase();

// The knobs, in order. `when` says which other knob values make it matter (it is then sent).
const KNOBS = [
  { key: "max_tokens", label: "Answer length (tokens)", type: "number" },
  { key: "schedule", label: "Schedule", type: "select" },
  { key: "block_length", label: "Block length", type: "number", when: { schedule: ["block"] } },
  { key: "window", label: "Window (masks)", type: "number", when: { schedule: ["window"] } },
  { key: "threshold", label: "Confidence threshold", type: "number", step: "0.05" },
  { key: "steps", label: "Steps (0: default)", type: "number" },
  { key: "temperature", label: "Temperature", type: "number", step: "0.1" },
  { key: "seed", label: "Seed", type: "number" },
  { key: "policy", label: "Cache policy", type: "select" },
  { key: "tau", label: "τ (nats)", type: "number", step: "0.05", when: { policy: ["entropy"] } },
  { key: "recent_k", label: "k (recent tokens)", type: "number",
    when: { policy: ["entropy", "interval"] } },
  { key: "refresh_interval", label: "Refresh interval", type: "number",
    when: { policy: ["interval"] } },
];

let token = sessionStorage.getItem(TOKEN_KEY) ?? "";
let info = null;
let running = null;  // AbortController of the generations in flight

function knob(side, key) {
  return $(`${side}-${key}`);
}

function buildKnobs(side) {
  const fieldset = $(`settings-${side}`);
  for (const k of KNOBS) {
    const label = document.createElement("label");
    label.dataset.knob = k.key;
    label.append(k.label);
    const input = document.createElement(k.type === "select" ? "select" : "input");
    input.id = `${side}-${k.key}`;
    input.name = `${side}-${k.key}`;
    if (k.type === "number") {
      input.type = "number";
      input.step = k.step ?? "1";
      input.inputMode = "decimal";
    }
    input.addEventListener("change", () => updateRelevance(side));
    label.append(input);
    fieldset.append(label);
  }
}

function setOptions(select, values, selected) {
  select.replaceChildren(...values.map((v) => new Option(v, v, false, v === selected)));
}

function relevant(side, k) {
  if (!k.when) return true;
  return Object.entries(k.when).every(([other, values]) =>
    values.includes(knob(side, other).value));
}

function updateRelevance(side) {
  for (const k of KNOBS) {
    const label = knob(side, k.key).closest("label");
    label.classList.toggle("off", !relevant(side, k));
  }
}

// Fills both sides from the server's defaults and limits; side B compares with no cache.
function applyInfo(model) {
  info = model;
  const d = model.default_decoding ?? {};
  const c = model.default_cache ?? {};
  const limits = model.limits ?? {};
  const policies = (limits.allowed_cache_policies ?? []).map((p) => lower(p, "CACHE_POLICY_"));
  const schedule = lower(d.schedule ?? "SCHEDULE_BLOCK", "SCHEDULE_");
  for (const side of ["a", "b"]) {
    setOptions(knob(side, "schedule"), ["block", "window", "timestep"], schedule);
    const policy = side === "a" ? (policies.includes("entropy") ? "entropy" : policies[0])
                                : (policies.includes("none") ? "none" : policies[0]);
    setOptions(knob(side, "policy"), policies, policy);
    const values = {
      max_tokens: Math.min(model.default_max_new_tokens || 32, limits.max_new_tokens || 1e9),
      block_length: d.block_length ?? 32,
      window: d.window ?? 32,
      threshold: d.confidence_threshold ?? 0,
      steps: d.steps ?? 0,
      temperature: d.temperature ?? 0,
      seed: Number(d.seed ?? 0),
      tau: c.entropy_threshold ?? 0.5,
      recent_k: c.recent_k ?? 32,
      refresh_interval: c.refresh_interval ?? 8,
    };
    for (const [key, value] of Object.entries(values)) knob(side, key).value = String(value);
    // The limits as hints; the form does not enforce them (novalidate): the server does.
    const max = { max_tokens: limits.max_new_tokens, block_length: limits.max_block_length,
                  window: limits.max_window, steps: limits.max_steps,
                  temperature: limits.max_temperature, threshold: 1 };
    for (const [key, value] of Object.entries(max)) {
      if (value) knob(side, key).max = String(value);
      knob(side, key).min = "0";
    }
    updateRelevance(side);
  }
  const l = limits;
  $("model-line").textContent =
    `${model.model} (${model.family}, ${model.num_layers} layers, vocabulary ${model.vocab_size}, ` +
    `${model.backend} backend). Limits: ${l.max_new_tokens} answer tokens, block ≤ ` +
    `${l.max_block_length}, window ≤ ${l.max_window}, temperature ≤ ${l.max_temperature}.`;
}

async function loadInfo() {
  try {
    applyInfo(await getJson("/v1/dllm/model_info", token));
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

// A number field: a number when it parses, else the text as typed (the server names the
// field and says what is wrong with it).
function value(side, key) {
  const raw = knob(side, key).value.trim();
  if (knob(side, key).type !== "number") return raw;
  if (raw === "") return undefined;
  const n = Number(raw);
  return Number.isFinite(n) ? n : raw;
}

function requestBody(side) {
  const chat = document.querySelector("input[name=mode]:checked").value === "chat";
  const prompt = $("prompt").value;
  const relevantValue = (key) =>
    relevant(side, KNOBS.find((k) => k.key === key)) ? value(side, key) : undefined;
  const decoding = {
    schedule: value(side, "schedule"),
    block_length: relevantValue("block_length"),
    window: relevantValue("window"),
    confidence_threshold: value(side, "threshold"),
  };
  const steps = value(side, "steps");
  if (steps !== 0) decoding.steps = steps;
  const cache = {
    policy: value(side, "policy"),
    entropy_threshold: relevantValue("tau"),
    recent_k: relevantValue("recent_k"),
    refresh_interval: relevantValue("refresh_interval"),
  };
  const body = {
    model: info?.model ?? "",
    max_tokens: value(side, "max_tokens"),
    temperature: value(side, "temperature"),
    seed: value(side, "seed"),
    stream: true,
    stream_options: { include_steps: true },
    decoding,
    cache,
  };
  if (chat) body.messages = [{ role: "user", content: prompt }];
  else body.prompt = prompt;
  return { path: chat ? "/v1/chat/completions" : "/v1/completions", body: JSON.parse(JSON.stringify(body)) };
}

function title(side, body) {
  const c = body.cache;
  const d = body.decoding;
  let cache = c.policy;
  if (c.policy === "entropy") cache += ` τ=${c.entropy_threshold} k=${c.recent_k}`;
  if (c.policy === "interval") cache += ` every ${c.refresh_interval} k=${c.recent_k}`;
  const span = d.schedule === "block" ? ` ${d.block_length}` : d.schedule === "window" ? ` ${d.window}` : "";
  return `${side.toUpperCase()}: ${d.schedule}${span}, threshold ${d.confidence_threshold}, ${cache}`;
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

async function generate(event) {
  event.preventDefault();
  if (running) return;
  const sides = $("compare").checked ? ["a", "b"] : ["a"];
  const requests = sides.map((side) => requestBody(side));
  const runs = $("runs");
  runs.replaceChildren();
  runs.dataset.state = "running";
  running = new AbortController();
  $("generate").disabled = true;
  $("stop").disabled = false;
  const views = sides.map((side, i) => {
    const asked = requests[i].body.max_tokens ?? info?.default_max_new_tokens;
    const length = Number.isInteger(asked) && asked > 0 ? Math.min(asked, 4096) : 0;
    return new RunView(runs, title(side, requests[i].body), length);
  });
  await Promise.all(sides.map((side, i) => run(side, views[i], requests[i], running.signal)));
  running = null;
  $("generate").disabled = false;
  $("stop").disabled = true;
  runs.dataset.state = "done";
}

function init() {
  buildKnobs("a");
  buildKnobs("b");
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
  $("form").addEventListener("submit", generate);
  $("stop").addEventListener("click", () => running?.abort());
  loadInfo();
}

init();
