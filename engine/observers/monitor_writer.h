// The ds_config's monitors (tensorboard, csv_monitor, ...): DeepSpeed's Train/Samples/* events of
// every step, indexed by the samples seen so far. Rank 0 only.
#pragma once

#include "config/ds_config.h"
#include "engine/monitor/monitor_master.h"
#include "engine/observers/step_observer.h"

namespace dsx::engine {

class MonitorWriter final : public StepObserver {
 public:
  MonitorWriter(const config::EngineConfig& config, monitor::MonitorMaster& monitors) : config_(config), monitors_(monitors) {}
  void after_step(const StepEvent& event) override;

 private:
  const config::EngineConfig& config_;
  monitor::MonitorMaster& monitors_;
  int64_t samples_seen_ = 0;
};

}  // namespace dsx::engine
