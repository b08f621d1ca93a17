// Static check: every metric name used by the dashboard, the rules (standalone and
// PrometheusRule), the HPA and the prometheus-adapter rule is in tests/deploy/metrics.txt
// (or is a recording rule defined in deploy/prometheus/rules), and every server metric
// appears on the dashboard.
//
//   node tests/deploy/check_metric_names.mjs <repo root>
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml, parseAllDocuments } from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(process.argv[2] ?? path.join(here, "..", ".."));
const read = (...p) => fs.readFileSync(path.join(root, ...p), "utf8");

const contract = new Map();
for (const line of read("tests", "deploy", "metrics.txt").split("\n")) {
  const [name, type] = line.replace(/#.*/, "").trim().split(/\s+/);
  if (name) contract.set(name, type);
}

const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool",
  "and", "or", "unless", "offset", "atan2", "inf", "nan"]);

// Metric names in a PromQL expression: identifiers that are not function calls, keywords,
// label names (inside {...} or a grouping clause) or numbers.
export function metricNames(expr) {
  let s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')  // strings
    .replace(/\{[^}]*\}/g, " ")                                        // label matchers
    .replace(/\[[^\]]*\]/g, " ")                                       // range / subquery
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\$\w+|\$\{\w+\}/g, " ");                                 // Grafana variables
  const names = new Set();
  for (const m of s.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = s.slice(m.index + m[0].length).trimStart();
    const before = s[m.index - 1] ?? " ";
    if (/[0-9.]/.test(before)) continue;              // 1e3, 5m inside numbers
    if (after.startsWith("(")) continue;               // function
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return names;
}

function base(name) {
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    const b = name.slice(0, -suffix.length);
    if (name.endsWith(suffix) && contract.get(b) === "histogram") return b;
  }
  return name;
}

const uses = []; // [origin, expr]
const recorded = new Set();
const rulesDir = path.join(root, "deploy", "prometheus", "rules");
const ruleGroups = [];
for (const f of fs.readdirSync(rulesDir).filter((f) => f.endsWith(".yml")).sort())
  ruleGroups.push([`deploy/prometheus/rules/${f}`, parseYaml(read("deploy", "prometheus", "rules", f)).groups]);
for (const d of parseAllDocuments(read("deploy", "k8s", "base", "prometheusrule.yaml")))
  ruleGroups.push(["deploy/k8s/base/prometheusrule.yaml", d.toJS().spec.groups]);
for (const [origin, groups] of ruleGroups)
  for (const g of groups) for (const r of g.rules) {
    if (r.record) recorded.add(r.record);
    // A recording rule of a constant (`vector(0.05)`) is a configurable threshold, such as
    // dllm:cache_shadow_mismatch_budget: it reads no metric.
    if (r.record && /^\s*vector\(\s*[-+0-9.eE]+\s*\)\s*$/.test(String(r.expr))) continue;
    uses.push([`${origin} ${r.record ?? r.alert}`, r.expr]);
  }

const dashboard = JSON.parse(read("deploy", "grafana", "dllm-serve.json"));
const dashboardNames = new Set();
for (const p of dashboard.panels)
  for (const t of p.targets ?? []) {
    uses.push([`dashboard panel "${p.title}"`, t.expr]);
    for (const n of metricNames(t.expr)) dashboardNames.add(base(n));
  }
for (const v of dashboard.templating.list)
  if (v.type === "query") uses.push([`dashboard variable ${v.name}`, v.definition.replace(/^label_values\((.*),\s*\w+\)$/, "$1")]);

const adapter = parseYaml(read("deploy", "prometheus", "prometheus-adapter-rules.yaml"));
for (const r of adapter.rules.custom) {
  uses.push(["prometheus-adapter seriesQuery", r.seriesQuery]);
  uses.push(["prometheus-adapter name", r.name.as]);
}
for (const d of parseAllDocuments(read("deploy", "k8s", "base", "hpa.yaml")))
  for (const m of d.toJS().spec.metrics) if (m.pods) uses.push(["HPA pods metric", m.pods.metric.name]);

const errors = [];
let count = 0;
for (const [origin, expr] of uses) {
  const names = metricNames(expr);
  if (!names.size) errors.push(`${origin}: no metric name found in ${JSON.stringify(expr)}`);
  for (const n of names) {
    count++;
    if (!contract.has(base(n)) && !recorded.has(n)) errors.push(`${origin}: unknown metric "${n}" in ${expr}`);
  }
}
for (const [name, type] of contract)
  if (type !== "external" && !dashboardNames.has(name)) errors.push(`server metric ${name} is on no dashboard panel`);

// Self-test of the extractor on expressions with known answers.
const cases = [
  ['sum by (le) (rate(dllm_x_bucket{pod=~"$pod", a="b{c}"}[$__rate_interval]))', ["dllm_x_bucket"]],
  ["histogram_quantile(0.95, sum without (pod) (rate(a_b[5m]))) > 1e3 and on (job) up == 0", ["a_b", "up"]],
  ["(foo or vector(0)) / bar offset 5m", ["foo", "bar"]],
];
for (const [expr, want] of cases) {
  const got = [...metricNames(expr)].sort().join(",");
  if (got !== [...want].sort().join(",")) errors.push(`extractor self-test: ${expr} -> ${got}, want ${want}`);
}

if (errors.length) {
  for (const e of errors) console.error(`FAIL ${e}`);
  process.exit(1);
}
console.log(`ok ${uses.length} expressions, ${count} metric references, all in tests/deploy/metrics.txt or recorded`);
