// An autotuning trial's metrics file (see trial_metrics.h).
#include "engine/trial_metrics.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "engine/observers/profile_metrics.h"

namespace dsx::engine {

void write_trial_metrics(const config::EngineConfig& config, Trainer& trainer, const models::Model& model,
                         int seq, int64_t profiled_steps, double seconds,
                         double spread, comm::Store& store, int rank, int world, size_t memory_limit) {
  store.set("autotune/peak/" + std::to_string(rank), std::to_string(trainer.zero().memory().peak_total()));
  if (rank != 0) return;
  ProfileMetrics m;
  for (int r = 0; r < world; ++r) {
    const std::string peak = store.get("autotune/peak/" + std::to_string(r), std::chrono::minutes(2));
    m.peak_memory_bytes = std::max<int64_t>(m.peak_memory_bytes, std::stoll(peak));
  }
  const double micro = static_cast<double>(config.train_micro_batch_size_per_gpu);
  m.profiled_steps = profiled_steps;
  m.latency = seconds / static_cast<double>(profiled_steps);
  m.throughput = static_cast<double>(config.train_batch_size) / m.latency;
  m.flops_per_gpu = 3 * model.forward_flops(static_cast<int64_t>(micro), seq) *
                    static_cast<double>(config.gradient_accumulation_steps) / m.latency;
  m.activation_bytes = static_cast<int64_t>(model.activation_bytes());
  m.memory_limit_bytes = static_cast<int64_t>(memory_limit);
  m.latency_spread = spread;
  write_profile_metrics(*config.autotuning.metric_path, m);
}

}  // namespace dsx::engine
