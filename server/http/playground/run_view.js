// One generation's panel: the canvas as it forms, the step strip, the final statistics and
// the answer. Events update plain state at once; the DOM is redrawn at most once per
// animation frame, so canvases the browser cannot draw in time are skipped (the step strip
// still gets every step: its marks are built from the state, not from the frames drawn).

const SVG = "http://www.w3.org/2000/svg";

export class RunView {
  // `container`: where the panel goes; `title`: its heading; `length`: the answer canvas
  // length (max_tokens); `fixed`: for a seeded canvas (infill), one entry per position,
  // {text} where the token is fixed and null where it is masked; null for all masks.
  constructor(container, title, length, fixed = null) {
    const template = document.getElementById("run-template");
    this.root = template.content.firstElementChild.cloneNode(true);
    container.append(this.root);
    this.root.querySelector(".run-title").textContent = title;
    this.canvasEl = this.root.querySelector(".canvas");
    this.stripEl = this.root.querySelector(".strip");
    this.statsEl = this.root.querySelector(".stats");
    this.answerEl = this.root.querySelector(".answer");
    this.errorEl = this.root.querySelector(".error");
    this.canvasEl.setAttribute("aria-label", `answer canvas of ${length} positions`);
    // Fixed tokens are never committed (the server sends no step event for them).
    this.cells = Array.from({ length }, (_, pos) => fixed?.[pos]
      ? { state: "fixed", text: fixed[pos].text, special: false }
      : { state: "masked", text: "", special: false });
    this.steps = [];  // {kind, rows, entropy, tau}
    this.newest = new Set();
    this.window = [0, 0];
    this.answer = "";
    this.final = null;
    this.frame = 0;
    this.started = performance.now();
  }

  onStep(step) {
    for (const cell of this.cells) if (cell.state === "provisional") cell.state = "masked";
    this.newest = new Set();
    for (const [pos, text, special] of step.committed) {
      if (pos < 0 || pos >= this.cells.length) continue;
      this.cells[pos] = { state: "committed", text, special: special === 1 };
      this.newest.add(pos);
    }
    // Absent when the server dropped this step's proposals for a newer step's.
    for (const [pos, text, special] of step.provisional ?? []) {
      if (pos < 0 || pos >= this.cells.length || this.cells[pos].state === "committed") continue;
      this.cells[pos] = { state: "provisional", text, special: special === 1 };
    }
    this.window = step.window;
    this.steps.push({
      kind: step.kind,
      rows: step.rows,
      entropy: step.max_entropy,
      tau: step.tau === "inf" ? Infinity : step.tau === "-inf" ? -Infinity : step.tau,
    });
    this.schedule();
  }

  onDelta(text) {
    this.answer += text;
    this.schedule();
  }

  onFinal(chunk) {
    this.final = chunk;
    this.clientSeconds = (performance.now() - this.started) / 1000;
    // Positions still masked at the end were never needed: the engine stops once an end
    // token is committed with everything before it decided.
    for (const cell of this.cells) {
      if (cell.state !== "committed" && cell.state !== "fixed") cell.state = "unused";
    }
    this.newest = new Set();
    this.schedule();
  }

  onError(message) {
    this.errorEl.textContent = message;
    this.errorEl.hidden = false;
    this.root.dataset.state = "error";
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  // Draws at once (the caller is done: no more frames are coming).
  flush() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.render();
    this.root.dataset.state = this.final ? "done" : this.root.dataset.state ?? "stopped";
  }

  render() {
    this.renderCanvas();
    this.renderStrip();
    this.answerEl.textContent = this.answer;
    if (this.final) this.renderStats();
  }

  renderCanvas() {
    const [lo, hi] = this.window;
    const nodes = this.cells.map((cell, pos) => {
      const span = document.createElement("span");
      span.className = `cell ${cell.state}`;
      if (cell.special) span.classList.add("special");
      if (this.newest.has(pos)) span.classList.add("new");
      if (!this.final && pos >= lo && pos < hi) span.classList.add("window");
      const shown = ["committed", "provisional", "fixed"].includes(cell.state);
      // Special tokens (end of text, turn ends) are drawn as one mark; the title names them.
      if (shown) span.textContent = cell.special ? "\u25C6" : cell.text;
      span.title = shown ? `position ${pos}: ${cell.state} ${JSON.stringify(cell.text)}`
                         : `position ${pos}: ${cell.state}`;
      return span;
    });
    this.canvasEl.replaceChildren(...nodes);
  }

  renderStrip() {
    const n = Math.max(this.steps.length, 1);
    const taus = this.steps.map((s) => s.tau).filter((t) => Number.isFinite(t));
    const top = Math.max(0.1, ...this.steps.map((s) => s.entropy), ...taus.map((t) => 1.25 * t));
    const height = 100;
    const y = (e) => height - (height * Math.min(e, top)) / top;
    this.stripEl.setAttribute("viewBox", `0 0 ${n} ${height}`);
    const marks = this.steps.map((s, i) => {
      const rect = document.createElementNS(SVG, "rect");
      const h = Math.max(3, height - y(s.entropy));
      rect.setAttribute("class", `mark ${s.kind}`);
      rect.setAttribute("x", String(i + 0.1));
      rect.setAttribute("width", "0.8");
      rect.setAttribute("y", String(height - h));
      rect.setAttribute("height", String(h));
      rect.dataset.kind = s.kind;
      rect.dataset.rows = String(s.rows);
      const tip = document.createElementNS(SVG, "title");
      tip.textContent = `step ${i}: ${s.kind}, ${s.rows} rows, max entropy ${s.entropy.toFixed(3)} nats`;
      rect.append(tip);
      return rect;
    });
    // τ as a polyline over the steps (it can move when the server autotunes its scale).
    const points = [];
    this.steps.forEach((s, i) => {
      if (Number.isFinite(s.tau)) points.push(`${i},${y(s.tau)}`, `${i + 1},${y(s.tau)}`);
    });
    if (points.length) {
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("class", "tau");
      line.setAttribute("fill", "none");
      line.setAttribute("points", points.join(" "));
      marks.push(line);
    }
    const full = this.steps.filter((s) => s.kind === "full").length;
    this.stripEl.setAttribute(
      "aria-label",
      `${this.steps.length} steps: ${full} full, ${this.steps.length - full} partial`,
    );
    this.stripEl.replaceChildren(...marks);
  }

  renderStats() {
    const c = this.final.cache_stats ?? {};
    const t = this.final.timings ?? {};
    const tokens = this.final.usage?.completion_tokens ?? 0;
    const seconds = t.total_seconds ?? 0;
    const rows = [
      ["steps", c.steps],
      ["full / partial", `${c.full_steps} / ${c.partial_steps}`],
      ["full-step ratio", (c.refresh_ratio ?? 0).toFixed(2)],
      ["rows per step", c.steps ? (c.rows_computed / c.steps).toFixed(1) : "-"],
      ["tokens", tokens],
      ["tokens/s", seconds > 0 ? (tokens / seconds).toFixed(1) : "-"],
      ["first commit", `${((t.first_commit_seconds ?? 0) * 1000).toFixed(1)} ms`],
      ["total", `${(seconds * 1000).toFixed(1)} ms`],
      ["max entropy", `${(c.max_committed_entropy ?? 0).toFixed(3)} nats`],
      ["finish", this.final.choices?.[0]?.finish_reason ?? "-"],
    ];
    const nodes = rows.map(([name, value]) => {
      const div = document.createElement("div");
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = name;
      dd.textContent = String(value);
      dd.dataset.stat = name;
      div.append(dt, dd);
      return div;
    });
    this.statsEl.replaceChildren(...nodes);
  }
}
