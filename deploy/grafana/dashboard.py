"""The dllm-serve Grafana dashboard, as code. deploy/generate.py renders it to
dllm-serve.json (commit both; tests/deploy checks they match).

Every query filters on the dashboard variables namespace and pod, which the Kubernetes
scrape (ServiceMonitor) and deploy/prometheus/prometheus.yml both attach. Standard library only.
"""
import json

SEL = 'namespace=~"$namespace", pod=~"$pod"'
RATE = "$__rate_interval"
# Server-side failures; keep in sync with deploy/prometheus/rules/dllm-recording.rules.yml.
ERROR_STATUSES = "INTERNAL|UNKNOWN|UNAVAILABLE|DATA_LOSS|UNIMPLEMENTED|RESOURCE_EXHAUSTED|DEADLINE_EXCEEDED"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def quantiles(metric: str, by: str = "", label: str = ""):
    """p50/p95/p99 targets of a histogram, optionally split by one more label."""
    extra = f", {by}" if by else ""
    legend_prefix = f"{{{{{by}}}}} " if by else label
    return [(f"histogram_quantile({q}, sum by (le{extra}) (rate({metric}_bucket{{{SEL}}}[{RATE}])))",
             f"{legend_prefix}p{int(q * 100)}") for q in (0.5, 0.95, 0.99)]


def timeseries(title, targets, unit, description, stack=False, min0=True):
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                **({"min": 0} if min0 else {}),
                "custom": {
                    "drawStyle": "line",
                    "lineWidth": 1,
                    "fillOpacity": 10,
                    "showPoints": "never",
                    "spanNulls": False,
                    "stacking": {"mode": "normal" if stack else "none", "group": "A"},
                },
            },
            "overrides": [],
        },
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def heatmap(title, target, description):
    return {
        "type": "heatmap",
        "title": title,
        "description": description,
        "targets": [target],
        "options": {
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Spectral", "steps": 64, "exponent": 0.5, "fill": "dark-orange", "reverse": False},
            "yAxis": {"axisPlacement": "left", "unit": "short", "decimals": 1},
            "rowsFrame": {"layout": "auto"},
            "legend": {"show": True},
            "tooltip": {"mode": "single", "yHistogram": True},
            "exemplars": {"color": "rgba(255,0,255,0.7)"},
            "filterValues": {"le": 1e-09},
        },
        "fieldConfig": {"defaults": {"custom": {"scaleDistribution": {"type": "linear"}}}, "overrides": []},
    }


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def panels():
    """(panel, width) in display order; rows span the full width."""
    return [
        (row("Traffic"), 24),
        (timeseries("Requests by status and protocol", [
            (f"sum by (protocol, status) (rate(dllm_requests_total{{{SEL}}}[{RATE}]))",
             "{{protocol}} {{status}}"),
        ], "reqps", "Finished requests per second by transport (grpc, http: the OpenAI-compatible API) and final status, as a gRPC code name (OK, CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED = HTTP 429, ...).", stack=True), 8),
        (timeseries("Error ratio (server-side statuses)", [
            (f'(sum(rate(dllm_requests_total{{{SEL}, status=~"{ERROR_STATUSES}"}}[{RATE}])) or vector(0))'
             f" / sum(rate(dllm_requests_total{{{SEL}}}[{RATE}]))", "error ratio"),
        ], "percentunit", "Share of requests that ended with a server-side status. Client faults (CANCELLED, INVALID_ARGUMENT, UNAUTHENTICATED) are excluded. Alert: > 5% for 5 min."), 8),
        (timeseries("Tokens per second", [
            (f"sum(rate(dllm_generated_tokens_total{{{SEL}}}[{RATE}]))", "generated"),
            (f"sum(rate(dllm_prompt_tokens_total{{{SEL}}}[{RATE}]))", "prompt"),
        ], "short", "Generated (committed output) and prompt tokens per second, all selected pods."), 8),
        (row("Latency"), 24),
        (timeseries("Request latency", quantiles("dllm_request_duration_seconds"), "s",
                    "End-to-end request duration (admission to final event). SLO alert: p95 > 20 s for 10 min."), 8),
        (timeseries("Time to first commit", quantiles("dllm_time_to_first_commit_seconds"), "s",
                    "Time from admission to the first committed (final) block, the dLLM analogue of TTFT. Provisional canvas snapshots do not count."), 8),
        (timeseries("Queue wait", quantiles("dllm_queue_wait_seconds"), "s",
                    "Time a request waits for a batch slot and KV budget before its first step."), 8),
        (row("Serving (vLLM's diffusion view)"), 24),
        (timeseries("Requests within latency targets", [
            (f'sum(rate(dllm_request_duration_seconds_bucket{{{SEL}, le="5"}}[{RATE}])) / sum(rate(dllm_request_duration_seconds_count{{{SEL}}}[{RATE}]))', "E2EL <= 5 s"),
            (f'sum(rate(dllm_time_to_first_commit_seconds_bucket{{{SEL}, le="1"}}[{RATE}])) / sum(rate(dllm_time_to_first_commit_seconds_count{{{SEL}}}[{RATE}]))', "first commit <= 1 s"),
            (f'sum(rate(dllm_queue_wait_seconds_bucket{{{SEL}, le="1"}}[{RATE}])) / sum(rate(dllm_queue_wait_seconds_count{{{SEL}}}[{RATE}]))', "queue wait <= 1 s"),
        ], "percentunit", "Share of accepted requests meeting each latency target (histogram buckets at 5 s and 1 s), the server-side view of SLO attainment: goodput is this share times the request rate. bench/serve.py measures the client-side figures (TTFT, TPOT, ITL, E2EL, goodput) with vLLM's definitions."), 8),
        (timeseries("Committed tokens per step (acceptance length)", [
            (f"sum(rate(dllm_committed_tokens_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_denoise_steps_total{{{SEL}}}[{RATE}]))", "mean"),
            (f"histogram_quantile(0.5, sum by (le) (rate(dllm_committed_tokens_per_step_bucket{{{SEL}}}[{RATE}])))", "p50"),
            (f"histogram_quantile(0.95, sum by (le) (rate(dllm_committed_tokens_per_step_bucket{{{SEL}}}[{RATE}])))", "p95"),
        ], "short", "Tokens one sequence-step commits: vLLM's mean acceptance length when it serves diffusion LMs through its speculative-decoding path (a draft = a denoising step, accepted tokens = committed tokens). 1 for vanilla decoding; threshold decoding commits several."), 8),
        (timeseries("Acceptance rate (committed / canvas positions)", [
            (f"sum(rate(dllm_committed_tokens_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_canvas_positions_total{{{SEL}}}[{RATE}]))", "committed / predicted positions"),
        ], "percentunit", "Committed tokens over the canvas positions the steps predicted (vLLM's accepted / draft tokens): how much of each step's canvas work turns into output."), 8),
        (row("Load"), 24),
        (timeseries("Queue depth and running requests", [
            (f"sum by (pod) (dllm_num_requests_waiting{{{SEL}}})", "{{pod}} waiting"),
            (f"sum by (pod) (dllm_num_requests_running{{{SEL}}})", "{{pod}} running"),
        ], "short", "Requests waiting for admission and requests in the running batch, per pod."), 8),
        (timeseries("Batch size", [
            (f"sum(rate(dllm_batch_size_sum{{{SEL}}}[{RATE}])) / sum(rate(dllm_batch_size_count{{{SEL}}}[{RATE}]))", "sequences per step (mean)"),
            (f"histogram_quantile(0.95, sum by (le) (rate(dllm_batch_size_bucket{{{SEL}}}[{RATE}])))", "sequences per step (p95)"),
            (f"sum(rate(dllm_rows_per_step_sum{{{SEL}}}[{RATE}])) / sum(rate(dllm_rows_per_step_count{{{SEL}}}[{RATE}]))", "query rows per step (mean)"),
        ], "short", "Sequences per engine step and query rows (tokens recomputed) per step. Partial steps recompute fewer rows than full ones."), 8),
        (timeseries("KV cache usage", [
            (f"max by (pod) (dllm_kv_cache_usage_ratio{{{SEL}}})", "{{pod}}"),
        ], "percentunit", "Share of the KV pool byte budget in use, per pod."), 8),
        (timeseries("Backlog (forecast seconds of work, the HPA signal)", [
            (f"max by (pod) (dllm_backlog_seconds{{{SEL}}})", "{{pod}}"),
        ], "s", "Per pod, the engine's forecast of the time to work off its running and queued requests at full batch (measured step time, steps per token). The HPA scales on its average (target 2 s); calls whose deadline it rules out are refused at arrival (engine.refuse_late_requests)."), 12),
        (timeseries("Requests switched to their tau under load (SLO-aware tau)", [
            (f"sum(rate(dllm_requests_tau_switched_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_requests_total{{{SEL}}}[{RATE}]))", "switched / finished requests"),
        ], "percentunit", "Share of requests whose deadline was at risk, so that they ran the rest of their decoding at cache.entropy_threshold_under_load (engine.tau_switch_slack_ratio): near 0 at light load, rising with the backlog. Requests without a deadline never switch."), 12),
        (row("Denoising and cache"), 24),
        (timeseries("Cache refresh ratio", [
            (f"max by (pod) (dllm_cache_refresh_ratio{{{SEL}}})", "{{pod}} (gauge, recent window)"),
            (f"sum by (pod) (rate(dllm_full_refresh_steps_total{{{SEL}}}[{RATE}])) / sum by (pod) (rate(dllm_denoise_steps_total{{{SEL}}}[{RATE}]))", "{{pod}} full-refresh steps / all steps"),
        ], "percentunit", "Share of work the approximate KV cache recomputes, per pod. 1 = no reuse (full recompute every step). An alert fires when it leaves its daily baseline."), 12),
        (timeseries("Cache quality: shadow mismatch rates", [
            (f"sum by (pod) (rate(dllm_cache_shadow_token_mismatch_total{{{SEL}}}[{RATE}])) / sum by (pod) (rate(dllm_cache_shadow_samples_total{{{SEL}}}[{RATE}]))", "{{pod}} token mismatches / samples"),
            (f"sum by (pod) (rate(dllm_cache_shadow_decision_mismatch_total{{{SEL}}}[{RATE}])) / sum by (pod) (rate(dllm_cache_shadow_samples_total{{{SEL}}}[{RATE}]))", "{{pod}} decision mismatches / samples"),
            (f"sum by (pod) (rate(dllm_cache_shadow_token_mismatch_under_load_total{{{SEL}}}[{RATE}])) / sum by (pod) (rate(dllm_cache_shadow_samples_under_load_total{{{SEL}}}[{RATE}]))", "{{pod}} token mismatches / samples, switched steps"),
            (f"sum by (pod) (rate(dllm_cache_shadow_seconds_total{{{SEL}}}[{RATE}])) / sum by (pod) (rate(dllm_step_seconds_total{{{SEL}}}[{RATE}]))", "{{pod}} shadow time / step time"),
        ], "percentunit", "Sampled partial steps (cache.shadow_sample_rate) are re-run as full forwards on a scratch cache. Token mismatches: the share that committed a token the full step would not propose at its position, the cost of a low refresh ratio (cache.autotune steers by it). Switched steps: those of requests running at their tau under load; they are also sampled while requests queue, and cache.autotune holds them to the same budget. Decision mismatches also count a token that lands a step earlier or later; threshold decoding keeps them near 20% at any tau. Alert: token mismatches above the budget (recording rule dllm:cache_shadow_mismatch_budget, default 5%) over 1 h. Shadow time / step time is what the sampling costs, capped by cache.shadow_max_time_fraction (default 2%)."), 12),
        (timeseries("EntropyCache tau scale (autotune)", [
            (f"max by (pod) (dllm_cache_tau_scale{{{SEL}}})", "{{pod}}"),
            (f"max by (pod) (dllm_cache_load_tau_scale{{{SEL}}})", "{{pod}} tau under load"),
        ], "short", "Factor on every request's EntropyCache tau. 1 unless cache.autotune is on; then it falls when the shadow token-mismatch rate exceeds the budget (more full refreshes) and rises when the rate is under half of it. The tau under load (switched requests) has a factor of its own, fed by their steps' samples only, at most 1: it can take a switch back down to the request's own tau."), 12),
        (timeseries("Step latency: full vs partial", quantiles("dllm_step_duration_seconds", by="kind"), "s",
                    "Wall time of one engine step, by kind: full = whole canvas recomputed, partial = only the rows the cache policy selected."), 12),
        (timeseries("Cache quality: KL and committed-probability change", [
            (f"sum(rate(dllm_cache_shadow_kl_sum{{{SEL}}}[{RATE}])) / sum(rate(dllm_cache_shadow_kl_count{{{SEL}}}[{RATE}]))", "KL(full || partial), mean (nats)"),
            (f"histogram_quantile(0.95, sum by (le) (rate(dllm_cache_shadow_kl_bucket{{{SEL}}}[{RATE}])))", "KL p95 (nats)"),
            (f"sum(rate(dllm_cache_shadow_max_prob_change_sum{{{SEL}}}[{RATE}])) / sum(rate(dllm_cache_shadow_max_prob_change_count{{{SEL}}}[{RATE}]))", "max |dp| of a committed token, mean"),
        ], "short", "Per shadow sample: mean KL divergence of the full step's predictive distributions from the partial step's, and the largest probability change of a token the step committed."), 12),
        (heatmap("Decoded-token entropy", {
            "expr": f"sum by (le) (increase(dllm_decoded_token_entropy_bucket{{{SEL}}}[{RATE}]))",
            "legendFormat": "{{le}}", "format": "heatmap",
        }, "Distribution over time of the predictive entropy (nats) of tokens at the step they were committed. A shift signals changed traffic or decoding quality."), 12),
        (timeseries("Sequence-steps per second by kind", [
            (f"sum(rate(dllm_full_refresh_steps_total{{{SEL}}}[{RATE}]))", "full refresh"),
            (f"sum(rate(dllm_partial_steps_total{{{SEL}}}[{RATE}]))", "partial"),
            (f"sum(rate(dllm_generated_tokens_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_denoise_steps_total{{{SEL}}}[{RATE}]))", "tokens committed per sequence-step"),
        ], "short", "Denoising sequence-steps per second split into full refreshes and partial (cached) steps, and tokens committed per sequence-step (the parallel-decoding speed lever)."), 12),
        (timeseries("Decision overhead fraction", [
            (f"sum(rate(dllm_decision_overhead_seconds_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_step_seconds_total{{{SEL}}}[{RATE}]))", "decision / step time"),
        ], "percentunit", "Share of step wall time spent in the cache policy and decoder decisions rather than the forward pass."), 12),
        (timeseries("Cache quality: K/V drift by region", [
            (f'sum by (region) (rate(dllm_cache_shadow_kv_drift_sum{{{SEL}, layers="all"}}[{RATE}])) / sum by (region) (rate(dllm_cache_shadow_kv_drift_count{{{SEL}, layers="all"}}[{RATE}]))', "{{region}}"),
            (f'histogram_quantile(0.95, sum by (le) (rate(dllm_cache_shadow_kv_drift_bucket{{{SEL}, layers="last"}}[{RATE}])))', "all regions, last third of layers (p95)"),
        ], "percentunit", "Relative L2 distance ||cached - fresh|| / ||fresh|| of the K/V a partial step read from the cache (prompt, decoded tokens older than the recent k, masks outside the window) or recomputed over stale context, mean per shadow sample."), 12),
        (timeseries("Cache quality: shadow sampling", [
            (f"sum(rate(dllm_cache_shadow_samples_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_partial_steps_total{{{SEL}}}[{RATE}]))", "sampled / partial sequence-steps"),
            (f"sum(rate(dllm_cache_shadow_seconds_total{{{SEL}}}[{RATE}])) / sum(rate(dllm_step_seconds_total{{{SEL}}}[{RATE}]))", "shadow time / step time"),
        ], "percentunit", "How many partial steps the shadow sampler checked (at most one per engine step, none while requests queue) and what it cost, relative to the serving steps."), 12),
        (row("Process"), 24),
        (timeseries("Resident memory", [
            (f"max by (pod) (process_resident_memory_bytes{{{SEL}}})", "{{pod}}"),
        ], "bytes", "Resident set size per pod. Flat under steady load once warm; steady growth is a leak."), 8),
        (timeseries("CPU", [
            (f"sum by (pod) (rate(process_cpu_seconds_total{{{SEL}}}[{RATE}]))", "{{pod}}"),
        ], "short", "CPU cores in use per pod (user + system)."), 8),
        (timeseries("Versions", [
            (f"count by (version, backend, model) (dllm_build_info{{{SEL}}})", "{{version}} {{backend}} {{model}}"),
        ], "short", "Pods per server version, backend and model (dllm_build_info); a rollout shows as two lines."), 8),
    ]


def variables():
    def query_var(name, label, query):
        return {
            "name": name, "label": label, "type": "query",
            "datasource": DATASOURCE,
            "query": {"query": query, "refId": f"{name}-var"},
            "definition": query,
            "refresh": 2, "sort": 1, "multi": True, "includeAll": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [], "hide": 0, "regex": "",
        }
    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "options": [], "hide": 0, "refresh": 1, "regex": ""},
        query_var("namespace", "Namespace", "label_values(dllm_num_requests_running, namespace)"),
        query_var("pod", "Pod", 'label_values(dllm_num_requests_running{namespace=~"$namespace"}, pod)'),
    ]


def build():
    laid_out, x, y, row_h, next_id = [], 0, 0, 8, 1
    for panel, width in panels():
        height = 1 if panel["type"] == "row" else row_h
        if x + width > 24:
            x, y = 0, y + row_h
        panel = {"id": next_id, "datasource": DATASOURCE, **panel,
                 "gridPos": {"h": height, "w": width, "x": x, "y": y}}
        if panel["type"] == "row":
            panel.pop("datasource")
        next_id += 1
        targets = []
        for i, t in enumerate(panel.get("targets", [])):
            if isinstance(t, tuple):
                t = {"expr": t[0], "legendFormat": t[1]}
            targets.append({"datasource": DATASOURCE, "refId": chr(ord("A") + i), "range": True, **t})
        if "targets" in panel:
            panel["targets"] = targets
        laid_out.append(panel)
        x += width
        if x >= 24:
            x, y = 0, y + height
    return {
        "title": "dllm-serve",
        "uid": "dllm-serve",
        "description": "dllm-serve: diffusion LM inference (traffic, latency, batching, EntropyCache, denoising).",
        "tags": ["dllm-serve", "inference", "grpc"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": variables()},
        "panels": laid_out,
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"
