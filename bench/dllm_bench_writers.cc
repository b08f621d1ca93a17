#include "bench/dllm_bench_writers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/core/param_fields.h"

namespace dllm::bench {
namespace {

nlohmann::json DecodingJson(const DecodingParams& d) {
  nlohmann::json j;
  j["schedule"] = Name(d.schedule);
  j["remasking"] = Name(d.remasking);
  j["steps"] = d.steps;
  if (d.schedule == Schedule::kBlock) j["block_length"] = d.block_length;
  if (d.schedule == Schedule::kWindow) j["window"] = d.window;
  if (d.schedule == Schedule::kTimestep) j["eps"] = Round(d.eps, 6);
  if (d.confidence_threshold > 0) j["threshold"] = Round(d.confidence_threshold, 4);
  if (d.temperature > 0) j["temperature"] = Round(d.temperature, 4);
  return j;
}

// The policy's own knobs (the cache fields of engine/core/param_fields.h that name it), and a
// shadow rate when the setting has one, keyed by their short spec names ("tau", "rollout_p").
nlohmann::json PolicyParams(const CacheParams& c) {
  nlohmann::json j = nlohmann::json::object();
  const DecodingParams unused;
  for (const ParamField& f : ParamFields()) {
    if (f.section != ParamSection::kCache) continue;
    const bool own = std::find(f.policies.begin(), f.policies.end(), c.policy) != f.policies.end();
    const std::optional<ParamValue> value = f.get(unused, c);
    if (!value || !(own || (f.optional && f.policies.empty()))) continue;
    const std::string key(f.alias.empty() ? f.name : f.alias);
    if (f.type != ParamType::kFloat) {
      j[key] = std::get<int64_t>(*value);
    } else if (const double x = std::get<double>(*value); std::isfinite(x)) {
      j[key] = Round(x, 6);
    } else {
      j[key] = x > 0 ? "inf" : "-inf";
    }
  }
  return j;
}

std::string PolicyName(CachePolicyKind k) { return std::string(Name(k)); }

// Quantile q of `values` (nearest rank on a sorted copy); 0 for none.
double Quantile(std::vector<float> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i =
      std::min(values.size() - 1, static_cast<size_t>(std::lround(q * (values.size() - 1))));
  return values[i];
}

// Decoding dynamics, comparable with published figures for real dLLMs: tokens per forward
// (tokens committed per denoising step, end tokens included: what one forward decides), the
// histogram of committed tokens' entropies, and the distribution of each step's max committed
// entropy (EntropyCache's signal; 0 for a step that commits nothing).
nlohmann::json DynamicsJson(const Result& r, int64_t steps) {
  static constexpr double kEdges[] = {0.01, 0.1, 0.5, 1.0, 2.0};  // nats; bins [lo, hi)
  nlohmann::json j;
  const double committed = static_cast<double>(r.committed_entropies.size());
  j["tokens_per_forward"] = Round(steps ? committed / steps : 0, 3);
  double sum = 0;
  std::vector<int64_t> counts(std::size(kEdges) + 1, 0);
  for (float e : r.committed_entropies) {
    sum += e;
    counts[std::upper_bound(std::begin(kEdges), std::end(kEdges), double(e)) -
           std::begin(kEdges)]++;
  }
  j["mean_token_entropy"] = Round(committed ? sum / committed : 0, 4);
  nlohmann::json hist = nlohmann::json::object();
  for (size_t b = 0; b < counts.size(); ++b) {
    const std::string lo = b == 0 ? "0" : absl::StrCat(kEdges[b - 1]);
    const std::string hi = b < std::size(kEdges) ? absl::StrCat(kEdges[b]) : "inf";
    hist[absl::StrCat(lo, "-", hi)] = Round(committed ? counts[b] / committed : 0, 4);
  }
  j["committed_entropy_hist"] = hist;
  const std::vector<float>& m = r.step_max_entropies;
  double above = 0, msum = 0;
  for (float e : m) {
    above += e > 0.5f ? 1 : 0;
    msum += e;
  }
  j["step_max_entropy"] = {{"mean", Round(m.empty() ? 0 : msum / m.size(), 4)},
                           {"p50", Round(Quantile(m, 0.5), 4)},
                           {"p90", Round(Quantile(m, 0.9), 4)},
                           {"frac_above_0.5", Round(m.empty() ? 0 : above / m.size(), 4)}};
  return j;
}

// The row's decision_overhead_frac and decision_cost. EntropyCache's decision is its Plan +
// Observe bookkeeping plus the entropy term of the row statistics, which the engine computes
// inside the LM head for every predicted row: charged here at this CPU's measured ns per row
// (bench/entropy_cost.h). Other policies' decisions do not read the entropy.
void AddDecisionCost(const Setting& setting, const Result& r, const EntropyCost& entropy_cost,
                     nlohmann::json& j) {
  const double entropy_s = setting.cache.policy == CachePolicyKind::kEntropy
                               ? r.predicted_rows * entropy_cost.entropy_ns * 1e-9
                               : 0.0;
  j["decision_overhead_frac"] = Round(r.wall_s > 0 ? (r.decision_s + entropy_s) / r.wall_s : 0, 5);
  j["decision_cost"] = {{"policy_s", Round(r.decision_s, 5)},
                        {"entropy_term_s", Round(entropy_s, 5)},
                        {"predicted_rows", r.predicted_rows}};
  // The rate behind entropy_term_s, on the rows it is charged to: a reader (and the smoke test)
  // can check the charge without the machine that measured it.
  if (setting.cache.policy == CachePolicyKind::kEntropy)
    j["decision_cost"]["entropy_ns_per_row"] = Round(entropy_cost.entropy_ns, 1);
}

// Costs per answer token that a shared machine does not distort: process CPU seconds (wall
// time stretches when other work takes the cores, CPU time much less), query rows computed and
// multiply-adds. The tokens are those tokens_per_s counts.
void AddCostPerToken(const Result& r, nlohmann::json& j) {
  const double tokens = static_cast<double>(r.tokens);
  j["cpu_s"] = Round(r.cpu_s, 3);
  j["cpu_s_per_token"] = tokens > 0 ? Round(r.cpu_s / tokens, 6) : 0.0;
  j["rows_per_token"] = tokens > 0 ? Round(r.rows_computed / tokens, 3) : 0.0;
  j["macs_per_token"] = tokens > 0 ? std::round(r.macs / tokens) : 0.0;
}

// Empty drift cells: the step had no position in that region.
std::string DriftCell(const KvDrift& d) {
  return d.positions > 0 && d.layers > 0 ? absl::StrCat(d.kv) : std::string();
}

}  // namespace

double Round(double x, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(x * f) / f;
}

nlohmann::json RowJson(const RowContext& ctx, const Setting& setting, const Result& r) {
  nlohmann::json j;
  j["model"] = ctx.info.family;
  j["decoding"] = DecodingJson(setting.decoding);
  j["policy"] = PolicyName(setting.cache.policy);
  j["params"] = PolicyParams(setting.cache);
  if (setting.logprobs) j["logprobs"] = *setting.logprobs;
  j["tasks"] = ctx.n_tasks;
  j["gen_length"] = ctx.gen_length;
  j["batch"] = ctx.batch;
  j["accuracy"] = Round(r.accuracy, 4);
  for (const auto& [family, counts] : r.by_family)
    j["accuracy_by_family"][family] = Round(double(counts.first) / counts.second, 4);
  j["tokens_per_s"] = Round(r.tokens_per_s, 2);
  j["steps_per_token"] = Round(r.steps_per_token, 4);
  j["full_step_ratio"] = Round(r.full_step_ratio, 4);
  j["rows_per_step"] = Round(r.rows_per_step, 2);
  const double step_s = r.full_step_seconds + r.partial_step_seconds;
  j["full_step_s"] = Round(r.full_step_seconds, 4);
  j["partial_step_s"] = Round(r.partial_step_seconds, 4);
  j["full_time_frac"] = Round(step_s > 0 ? r.full_step_seconds / step_s : 0, 4);
  j["ms_per_full_step"] =
      Round(r.engine_full_steps ? 1e3 * r.full_step_seconds / r.engine_full_steps : 0, 3);
  j["ms_per_partial_step"] =
      Round(r.engine_partial_steps ? 1e3 * r.partial_step_seconds / r.engine_partial_steps : 0, 3);
  AddDecisionCost(setting, r, ctx.entropy_cost, j);
  j["steps"] = Round(r.steps, 2);
  j["mean_committed_entropy"] = Round(r.mean_committed_entropy, 4);
  j["dynamics"] = DynamicsJson(r, r.total_steps);
  j["wall_s"] = Round(r.wall_s, 3);
  AddCostPerToken(r, j);
  if (r.errors) j["errors"] = r.errors;
  return j;
}

nlohmann::json RejectedRowJson(const Setting& setting, const std::string& error) {
  nlohmann::json j;
  j["decoding"] = DecodingJson(setting.decoding);
  j["policy"] = PolicyName(setting.cache.policy);
  j["params"] = PolicyParams(setting.cache);
  if (setting.logprobs) j["logprobs"] = *setting.logprobs;
  j["error"] = error;
  return j;
}

// The standard error is over the per-task differences (the paired test the issue asks for:
// an accuracy delta alone hides answers that change both ways).
nlohmann::json PairedJson(const Result& r, const Result& base) {
  int changed = 0, gained = 0, lost = 0;
  const size_t n = std::min(r.answers.size(), base.answers.size());
  for (size_t i = 0; i < n; ++i) {
    changed += r.answers[i] != base.answers[i];
    gained += r.correct[i] && !base.correct[i];
    lost += !r.correct[i] && base.correct[i];
  }
  nlohmann::json j;
  j["tasks"] = n;
  j["changed"] = changed;
  j["gained"] = gained;
  j["lost"] = lost;
  const double mean = n ? double(gained - lost) / n : 0;
  const double var = n ? double(gained + lost) / n - mean * mean : 0;
  j["accuracy_diff"] = Round(mean, 4);
  j["accuracy_diff_se"] = Round(n > 1 ? std::sqrt(std::max(0.0, var) / (n - 1)) : 0, 4);
  return j;
}

nlohmann::json ShadowJson(const std::vector<ShadowSample>& samples, double rate, double wall_s) {
  nlohmann::json j;
  j["rate"] = Round(rate, 6);
  j["samples"] = samples.size();
  double kl = 0, kl_max = 0, change = 0, seconds = 0;
  int mismatches = 0, token_mismatches = 0, with_commits = 0;
  double drift[kShadowRegions] = {};
  int drift_n[kShadowRegions] = {};
  for (const auto& s : samples) {
    kl += s.kl_mean;
    kl_max = std::max(kl_max, s.kl_max);
    mismatches += s.decision_mismatch ? 1 : 0;
    token_mismatches += s.token_mismatch ? 1 : 0;
    if (s.committed > 0) {
      change += s.max_prob_change;
      ++with_commits;
    }
    seconds += s.seconds;
    for (int r = 0; r < kShadowRegions; ++r) {
      if (s.drift[r].positions == 0) continue;
      drift[r] += s.drift[r].kv;
      ++drift_n[r];
    }
  }
  const double n = static_cast<double>(samples.size());
  j["mean_kl"] = n ? Round(kl / n, 6) : 0.0;
  j["max_kl"] = Round(kl_max, 6);
  j["mismatch_rate"] = n ? Round(mismatches / n, 4) : 0.0;
  j["token_mismatch_rate"] = n ? Round(token_mismatches / n, 4) : 0.0;
  j["mean_max_prob_change"] = with_commits ? Round(change / with_commits, 5) : 0.0;
  nlohmann::json d = nlohmann::json::object();
  for (int r = 0; r < kShadowRegions; ++r) {
    if (drift_n[r]) d[ShadowRegionName(r)] = Round(drift[r] / drift_n[r], 5);
  }
  j["mean_kv_drift"] = d;
  j["shadow_s"] = Round(seconds, 3);
  j["time_fraction"] = wall_s > seconds ? Round(seconds / (wall_s - seconds), 4) : 0.0;
  j["tau_scale"] = samples.empty() ? 1.0 : Round(samples.back().tau_scale, 5);
  return j;
}

void WriteShadowCsvHeader(std::ostream& csv) {
  csv << "decoding,policy,tau,k,request,step,entropy,kl_mean,kl_max,mismatch,"
         "max_prob_change,committed,token_mismatch";
  for (int r = 0; r < kShadowRegions; ++r) {
    csv << ",drift_" << ShadowRegionName(r);
    for (int g = 0; g < kShadowLayerGroups; ++g)
      csv << ",drift_" << ShadowRegionName(r) << "_" << ShadowLayerGroupName(g);
  }
  csv << "\n";
}

void WriteShadowCsvRows(std::ostream& csv, const Setting& setting,
                        const std::vector<ShadowSample>& samples) {
  for (const auto& s : samples) {
    csv << '"' << setting.decoding_spec << "\"," << PolicyName(setting.cache.policy) << ","
        << setting.cache.entropy_threshold << "," << setting.cache.recent_k << "," << s.request_id
        << "," << s.step << "," << s.entropy << "," << s.kl_mean << "," << s.kl_max << ","
        << (s.decision_mismatch ? 1 : 0) << "," << s.max_prob_change << "," << s.committed << ","
        << (s.token_mismatch ? 1 : 0);
    for (int reg = 0; reg < kShadowRegions; ++reg) {
      csv << "," << DriftCell(s.drift[reg]);
      for (int g = 0; g < kShadowLayerGroups; ++g)
        csv << "," << DriftCell(s.drift_by_group[reg][g]);
    }
    csv << "\n";
  }
}

void WriteSweepCsvHeader(std::ostream& csv) {
  csv << "decoding,tau,k,accuracy,tokens_per_s,speedup_vs_none,full_step_ratio,rows_per_step,"
         "speedup_vs_baseline,shadow_samples,mismatch_rate,mean_kl";
  for (int r = 0; r < kShadowRegions; ++r) csv << ",drift_" << ShadowRegionName(r);
  csv << ",token_mismatch_rate\n";
}

void WriteSweepCsvRow(std::ostream& csv, const SweepRow& row, std::vector<SweepSeries>* series) {
  const std::string& dname = row.setting.decoding_spec;
  if (series->empty() || series->back().decoding != dname) {
    const int next_row = series->empty() ? 0 : series->back().first_row + series->back().rows;
    series->push_back({dname, next_row, 0});
  }
  ++series->back().rows;
  const Result& r = row.r;
  csv << '"' << dname << '"' << "," << row.setting.cache.entropy_threshold << ","
      << row.setting.cache.recent_k << "," << r.accuracy << "," << r.tokens_per_s << ","
      << row.speedup_vs_none << "," << r.full_step_ratio << "," << r.rows_per_step << ","
      << row.speedup_vs_baseline;
  // Drift cells also stay empty for regions that no sampled step had.
  const nlohmann::json& q = row.shadow;
  csv << "," << (q.is_null() ? "" : absl::StrCat(q["samples"].get<size_t>())) << ","
      << (q.is_null() ? "" : absl::StrCat(q["mismatch_rate"].get<double>())) << ","
      << (q.is_null() ? "" : absl::StrCat(q["mean_kl"].get<double>()));
  for (int reg = 0; reg < kShadowRegions; ++reg) {
    const char* name = ShadowRegionName(reg);
    csv << ",";
    if (!q.is_null() && q["mean_kv_drift"].contains(name))
      csv << q["mean_kv_drift"][name].get<double>();
  }
  csv << "," << (q.is_null() ? "" : absl::StrCat(q["token_mismatch_rate"].get<double>()));
  csv << "\n";
}

void PlotSweep(const std::string& prefix, const std::string& baseline_spec,
               const std::vector<SweepSeries>& series) {
  const std::string script = prefix + ".gp";
  std::ofstream gp(script);
  gp << "set terminal png size 900,600\n"
     << "set output '" << prefix << ".png'\n"
     << "set datafile separator ','\n"
     << "set key autotitle columnhead\n"
     << "set xlabel 'speedup vs baseline (" << baseline_spec << ")'\n"
     << "set ylabel 'accuracy'\n"
     << "set title 'EntropyCache: accuracy vs speed (labels: tau)'\n"
     << "set termoption noenhanced\n"
     << "set key bottom right\n"
     << "plot";
  // One line per decoding; its tau labels above (even series) or below (odd) the points.
  for (size_t i = 0; i < series.size(); ++i) {
    const SweepSeries& ss = series[i];
    const std::string rows =
        absl::StrCat(" every ::", ss.first_row, "::", ss.first_row + ss.rows - 1);
    gp << (i ? ", \\\n " : " ") << "'" << prefix << ".csv'" << rows
       << " using 9:4 with linespoints title '" << absl::StrReplaceAll(ss.decoding, {{"'", "''"}})
       << "', '" << prefix << ".csv'" << rows
       << " using 9:4:(sprintf('%.2f',$2)) with labels offset 0," << (i % 2 ? -1 : 1) << " notitle";
  }
  gp << "\n";
  gp.close();
  const std::string cmd = "gnuplot '" + script + "'";
  if (std::system(cmd.c_str()) != 0)
    std::cerr << "dllm-bench: gnuplot failed; CSV kept\n";
  else
    std::cerr << "dllm-bench: wrote " << prefix << ".csv and " << prefix << ".png\n";
}

}  // namespace dllm::bench
