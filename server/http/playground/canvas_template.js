// The playground's infill mode: an answer canvas written as text with gaps, "{{N}}" standing
// for N masked positions and everything else fixed. The server's tokenizer turns the fixed
// text into ids (POST /v1/dllm/tokenize), so the canvas sent (the request's `canvas`: ids,
// with the model's mask id at the gaps) holds exactly the tokens the model would read.

import { apiError, requestHeaders } from "./sse.js";

const GAP = /\{\{(\d+)\}\}/g;

// [{fixed: TEXT} | {masks: N}] of a template, in order; empty fixed pieces dropped.
export function parseTemplate(template) {
  const pieces = [];
  let at = 0;
  for (const m of template.matchAll(GAP)) {
    if (m.index > at) pieces.push({ fixed: template.slice(at, m.index) });
    pieces.push({ masks: Number(m[1]) });
    at = m.index + m[0].length;
  }
  if (at < template.length) pieces.push({ fixed: template.slice(at) });
  return pieces;
}

async function tokenize(text, token) {
  const response = await fetch("/v1/dllm/tokenize", {
    method: "POST",
    headers: requestHeaders(token),
    body: JSON.stringify({ prompt: text }),
  });
  if (!response.ok) throw await apiError(response);
  return response.json();
}

// The canvas of a template: {ids, cells}, one cell per position, {text} where fixed and null
// where masked. Throws an Error naming the problem when there is no gap (the server would
// refuse it too, but this says it in the template's own terms).
export async function buildCanvas(template, maskId, token) {
  const pieces = parseTemplate(template);
  if (!pieces.some((p) => p.masks > 0)) {
    throw new Error("The answer canvas has no gap: write {{N}} where N tokens are to be generated.");
  }
  const ids = [];
  const cells = [];
  for (const piece of pieces) {
    if (piece.masks !== undefined) {
      for (let i = 0; i < piece.masks; ++i) {
        ids.push(maskId);
        cells.push(null);
      }
      continue;
    }
    const t = await tokenize(piece.fixed, token);
    ids.push(...t.token_ids);
    cells.push(...t.tokens.map((text) => ({ text })));
  }
  return { ids, cells };
}

// A preset's canvas ([{fixed: TEXT} | {masks_for: TEXT}], then masks up to `length`) as
// template text: {{N}} for the tokens of each masks_for text (the gap keeps the place of the
// text it stands for, whatever the tokenizer), and a last gap that fills the canvas to
// `length` positions.
export async function presetTemplate(canvas, length, token) {
  let text = "";
  let used = 0;
  for (const piece of canvas) {
    const t = await tokenize(piece.fixed ?? piece.masks_for, token);
    used += t.count;
    text += piece.fixed ?? `{{${t.count}}}`;
  }
  return length > used ? `${text}{{${length - used}}}` : text;
}
