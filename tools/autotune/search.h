// The search of `dsx autotune`, apart from how a trial runs (tools/autotune_trials.cpp starts
// real `dsx launch ... dsx train` jobs):
//   1. per ZeRO stage, the largest micro-batch that fits the memory limit: a one-step probe at
//      the smallest micro-batch gives the memory model (bytes = fixed + micro-batch x activations
//      per sample, from the engine's own ledger), the model predicts the largest, and probes at
//      the prediction and one above confirm it; a wrong prediction falls back to a binary
//      search. A probe that runs out of memory is an answer, not an error.
//   2. per stage, the largest few micro-batch / accumulation splits of the global batch that fit,
//      each timed by a short profiled run (autotuning.start_profile_step..end_profile_step);
//   3. the best by the config's autotuning.metric (throughput, latency or flops).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/observers/profile_metrics.h"

namespace dsx::autotune {

// DataTooSmall: the data holds fewer tokens than one batch of that micro-batch; for the search it
// bounds the micro-batch as running out of memory does.
enum class TrialStatus { Ok, OutOfMemory, DataTooSmall, Failed, TimedOut };
const char* to_string(TrialStatus status);

struct Experiment {
  std::string name;  // z<stage>_mbs<micro>_gas<accumulation>[_mem]: its folder under exps_dir
  int stage = 0;
  int64_t micro_batch = 1;
  int64_t accumulation = 1;
  bool timed = false;  // false: a one-step memory probe
};

struct Trial {
  Experiment experiment;
  TrialStatus status = TrialStatus::Failed;
  engine::ProfileMetrics metrics;  // when Ok
  std::string error;       // otherwise: what went wrong, and where the log is
  double seconds = 0;      // wall time of the whole trial
};

using TrialRunner = std::function<Trial(const Experiment&)>;

enum class Metric { Throughput, Latency, Flops };
Metric metric_named(const std::string& name);  // the config's autotuning.metric

struct TuneRequest {
  std::vector<int> stages;
  int64_t world = 1;                 // data-parallel ranks
  int64_t train_batch_size = 1;      // the global batch every split keeps
  int64_t min_micro = 1;             // autotuning.min_train_micro_batch_size_per_gpu
  int64_t max_micro = 1024;          // autotuning.max_train_micro_batch_size_per_gpu
  int64_t splits_per_stage = 3;      // autotuning.num_tuning_micro_batch_sizes
  Metric metric = Metric::Throughput;
  int64_t memory_limit = 0;          // bytes per rank the probes ran under
};

struct StageMemory {
  int stage = 0;
  int64_t max_micro = 0;         // the largest micro-batch that fits; 0: not even min_micro
  int64_t predicted = 0;         // the memory model's answer before the confirming probes
  int64_t fixed_bytes = 0;       // model states and buffers (independent of the micro-batch)
  int64_t per_sample_bytes = 0;  // activations per sample of micro-batch
  int probes = 0;
};

struct TuneResult {
  std::vector<StageMemory> memory;
  std::vector<Trial> trials;  // in the order they ran
  std::optional<size_t> best;  // index into trials of the fastest timed trial
};

// Throws dsx::Error(Config) for an impossible request and dsx::Error(Launch) when a trial fails
// for a reason other than memory (a broken setup fails every trial alike: stop at the first).
TuneResult tune(const TuneRequest& request, const TrialRunner& run);

// The memory model's largest micro-batch: (limit - fixed) / per_sample, within [0, cap].
int64_t predict_max_micro(int64_t limit, int64_t fixed, int64_t per_sample, int64_t cap);
// Micro-batches m with per_rank_batch % m == 0 and min_micro <= m <= max_micro, the `count`
// largest, largest first.
std::vector<int64_t> split_candidates(int64_t per_rank_batch, int64_t min_micro, int64_t max_micro, int64_t count);
// Whether trial a beats trial b by the metric (both Ok).
bool better(const Trial& a, const Trial& b, Metric metric);

// The tables `dsx autotune` prints and writes: the memory search per stage, then every timed
// trial with its metric and the ratio to the best.
std::string format_report(const TuneRequest& request, const TuneResult& result);

}  // namespace dsx::autotune
