// An autotuning trial's end: under DeepSpeed's autotuner the engine times steps
// (start_profile_step, end_profile_step], writes the metrics file and ends the run; dsx adds the
// most memory any rank held.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/store/store.h"
#include "config/ds_config.h"
#include "engine/trainer.h"
#include "models/model.h"

namespace dsx::engine {

// Every rank posts its peak memory through `store`; rank 0 writes the metrics file
// (autotuning.metric_path). `spread`: the timed steps' relative standard deviation
// (ProfileWindow::spread).
void write_trial_metrics(const config::EngineConfig& config, Trainer& trainer, const models::Model& model,
                         int seq, int64_t profiled_steps, double seconds,
                         double spread, comm::Store& store, int rank, int world, size_t memory_limit);

}  // namespace dsx::engine
