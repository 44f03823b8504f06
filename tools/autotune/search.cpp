// The autotuner's search (see search.h).
#include "tools/autotune/search.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "dsx/error.h"

namespace dsx::autotune {
namespace {

std::string experiment_name(int stage, int64_t micro, int64_t accumulation, bool timed) {
  std::string name = "z" + std::to_string(stage) + "_mbs" + std::to_string(micro);
  return timed ? name + "_gas" + std::to_string(accumulation) : name + "_mem";
}

double metric_value(const Trial& t, Metric metric) {
  switch (metric) {
    case Metric::Throughput: return t.metrics.throughput;
    case Metric::Latency: return t.metrics.latency;
    case Metric::Flops: return t.metrics.flops_per_gpu;
  }
  return 0;
}

void validate(const TuneRequest& r) {
  if (r.stages.empty()) throw Error(ErrorKind::Config, "autotune: no ZeRO stage to try");
  for (int s : r.stages) {
    if (s < 0 || s > 3) throw Error(ErrorKind::Config, "autotune: ZeRO stage " + std::to_string(s) + " does not exist (0-3)");
  }
  if (r.world < 1 || r.train_batch_size < 1 || r.train_batch_size % r.world != 0) {
    throw Error(ErrorKind::Config, "autotune: the global batch " + std::to_string(r.train_batch_size) +
                                       " does not split over " + std::to_string(r.world) + " ranks");
  }
  if (r.min_micro < 1 || r.max_micro < r.min_micro) {
    throw Error(ErrorKind::Config, "autotune: autotuning.min_train_micro_batch_size_per_gpu (" +
                                       std::to_string(r.min_micro) + ") must be at least 1 and at most "
                                       "max_train_micro_batch_size_per_gpu (" + std::to_string(r.max_micro) + ")");
  }
  if (r.splits_per_stage < 1) throw Error(ErrorKind::Config, "autotune: num_tuning_micro_batch_sizes must be at least 1");
}

// Runs a trial and keeps it; a trial that broke for another reason than memory stops the search.
Trial run_kept(const TrialRunner& run, const Experiment& e, TuneResult& result) {
  Trial t = run(e);
  t.experiment = e;
  result.trials.push_back(t);
  if (t.status == TrialStatus::Failed || t.status == TrialStatus::TimedOut) {
    throw Error(ErrorKind::Launch, "autotune: trial " + e.name + " " + (t.status == TrialStatus::TimedOut ? "timed out" : "failed") +
                                       ": " + t.error);
  }
  return t;
}

StageMemory search_memory(const TuneRequest& r, int stage, const TrialRunner& run, TuneResult& result) {
  StageMemory sm;
  sm.stage = stage;
  std::optional<engine::ProfileMetrics> first;  // the smallest micro-batch's, for the memory model
  auto probe = [&](int64_t micro) {
    ++sm.probes;
    Trial t = run_kept(run, {experiment_name(stage, micro, 1, false), stage, micro, 1, false}, result);
    if (t.status == TrialStatus::Ok && !first) first = t.metrics;
    return t.status == TrialStatus::Ok;
  };
  if (!probe(r.min_micro)) return sm;
  // The memory model, from what the engine's ledger counted in the first probe.
  sm.per_sample_bytes = (first->activation_bytes + r.min_micro - 1) / r.min_micro;
  sm.fixed_bytes = std::max<int64_t>(0, first->peak_memory_bytes - first->activation_bytes);
  sm.predicted = std::max(r.min_micro, predict_max_micro(r.memory_limit, sm.fixed_bytes, sm.per_sample_bytes, r.max_micro));
  int64_t fits = r.min_micro, too_big = r.max_micro + 1;  // too_big: the smallest known not to fit
  if (sm.predicted > fits) (probe(sm.predicted) ? fits : too_big) = sm.predicted;
  if (fits == sm.predicted && fits + 1 < too_big) (probe(fits + 1) ? fits : too_big) = fits + 1;
  while (too_big - fits > 1) {  // the model was wrong: bisect
    const int64_t mid = fits + (too_big - fits) / 2;
    (probe(mid) ? fits : too_big) = mid;
  }
  sm.max_micro = fits;
  return sm;
}

std::string megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

const char* to_string(TrialStatus status) {
  switch (status) {
    case TrialStatus::Ok: return "ok";
    case TrialStatus::OutOfMemory: return "out of memory";
    case TrialStatus::DataTooSmall: return "more than the data";
    case TrialStatus::Failed: return "failed";
    case TrialStatus::TimedOut: return "timed out";
  }
  return "?";
}

Metric metric_named(const std::string& name) {
  if (name == "throughput") return Metric::Throughput;
  if (name == "latency") return Metric::Latency;
  if (name == "flops") return Metric::Flops;
  throw Error(ErrorKind::Config, "autotuning.metric must be throughput, latency or flops, not '" + name + "'");
}

int64_t predict_max_micro(int64_t limit, int64_t fixed, int64_t per_sample, int64_t cap) {
  if (limit <= 0 || per_sample <= 0) return cap;
  if (limit <= fixed) return 0;
  return std::min(cap, (limit - fixed) / per_sample);
}

std::vector<int64_t> split_candidates(int64_t per_rank_batch, int64_t min_micro, int64_t max_micro, int64_t count) {
  std::vector<int64_t> out;
  for (int64_t m = std::min(max_micro, per_rank_batch); m >= min_micro && static_cast<int64_t>(out.size()) < count; --m) {
    if (per_rank_batch % m == 0) out.push_back(m);
  }
  return out;
}

// The least relative difference between two timed trials that is not noise: a short timed window
// on a shared machine varies about this much from run to run even when its steps agree.
constexpr double kMinNoise = 0.02;

// `a` beats `b` only by more than the noise of the two measurements (their larger relative
// spread, at least kMinNoise). Within it the earlier trial keeps the lead, so two runs of the same
// search agree on the winner instead of following the noise.
bool clearly_better(const Trial& a, const Trial& b, Metric metric) {
  const double x = metric_value(a, metric), y = metric_value(b, metric);
  const double noise = std::max({a.metrics.latency_spread, b.metrics.latency_spread, kMinNoise});
  return metric == Metric::Latency ? x < y * (1 - noise) : x > y * (1 + noise);
}

TuneResult tune(const TuneRequest& r, const TrialRunner& run) {
  validate(r);
  TuneResult result;
  for (int stage : r.stages) result.memory.push_back(search_memory(r, stage, run, result));
  const int64_t per_rank = r.train_batch_size / r.world;
  for (const StageMemory& sm : result.memory) {
    for (int64_t micro : split_candidates(per_rank, r.min_micro, sm.max_micro, r.splits_per_stage)) {
      const int64_t gas = per_rank / micro;
      run_kept(run, {experiment_name(sm.stage, micro, gas, true), sm.stage, micro, gas, true}, result);
      const Trial& t = result.trials.back();
      if (t.status != TrialStatus::Ok) continue;
      if (!result.best || clearly_better(t, result.trials[*result.best], r.metric)) {
        result.best = result.trials.size() - 1;
      }
    }
  }
  return result;
}

std::string format_report(const TuneRequest& r, const TuneResult& result) {
  std::string out;
  char line[256];
  out += "largest micro-batch that fits, per ZeRO stage (" +
         (r.memory_limit ? megabytes(r.memory_limit) + " MB per rank" : std::string("no memory limit")) +
         "; memory model: fixed + micro-batch x per sample, from the first probe):\n\n";
  out += "| stage | fixed MB | MB per sample | model's largest | largest that fits | probes |\n";
  out += "|---:|---:|---:|---:|---:|---:|\n";
  for (const StageMemory& sm : result.memory) {
    std::snprintf(line, sizeof line, "| %d | %s | %s | %lld | %lld | %d |\n", sm.stage, megabytes(sm.fixed_bytes).c_str(),
                  megabytes(sm.per_sample_bytes).c_str(), static_cast<long long>(sm.predicted),
                  static_cast<long long>(sm.max_micro), sm.probes);
    out += line;
  }
  out += "\nprobes (one step each):";
  for (const Trial& t : result.trials) {
    if (t.experiment.timed) continue;
    out += " " + t.experiment.name + " " +
           (t.status == TrialStatus::Ok ? megabytes(t.metrics.peak_memory_bytes) + " MB" : std::string(to_string(t.status))) +
           ";";
  }
  out.back() = '\n';
  const double best = result.best ? metric_value(result.trials[*result.best], r.metric) : 0;
  std::snprintf(line, sizeof line, "\nsplits of the global batch %lld (micro-batch x accumulation x %lld ranks), timed:\n\n",
                static_cast<long long>(r.train_batch_size), static_cast<long long>(r.world));
  out += line;
  out += "| experiment | stage | micro-batch | accumulation | status | peak MB | samples/s | ms/step | spread | vs best |\n";
  out += "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < result.trials.size(); ++i) {
    const Trial& t = result.trials[i];
    if (!t.experiment.timed) continue;
    const bool ok = t.status == TrialStatus::Ok;
    const double v = ok ? metric_value(t, r.metric) : 0;
    const double ratio = !ok || best <= 0 || v <= 0 ? 0 : (r.metric == Metric::Latency ? best / v : v / best);
    std::snprintf(line, sizeof line, "| %s%s | %d | %lld | %lld | %s | %s | %.1f | %.2f | %s | %s |\n",
                  t.experiment.name.c_str(), result.best == i ? " (best)" : "", t.experiment.stage,
                  static_cast<long long>(t.experiment.micro_batch), static_cast<long long>(t.experiment.accumulation),
                  to_string(t.status), ok ? megabytes(t.metrics.peak_memory_bytes).c_str() : "-",
                  ok ? t.metrics.throughput : 0.0, ok ? t.metrics.latency * 1e3 : 0.0,
                  ok ? ("±" + std::to_string(static_cast<int>(t.metrics.latency_spread * 100 + 0.5)) + "%").c_str() : "-",
                  ok ? (std::to_string(static_cast<int>(ratio * 100 + 0.5)) + "%").c_str() : "-");
    out += line;
  }
  std::snprintf(line, sizeof line,
                "\nA split wins only when it beats the leader by more than the noise (the larger spread of the "
                "two, at least %d%%); within it the split tried first keeps the lead, so a repeated search "
                "picks the same one.\n",
                static_cast<int>(kMinNoise * 100));
  out += line;
  return out;
}

}  // namespace dsx::autotune
