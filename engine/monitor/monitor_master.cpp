// MonitorMaster: builds the enabled monitors and fans events out to them.
#include "engine/monitor/monitor_master.h"

#include "engine/monitor/csv_monitor.h"
#include "engine/monitor/tensorboard_monitor.h"

namespace dsx::engine::monitor {

std::string unavailable_monitor_note(const std::string& name) {
  return "dsx: note: the \"" + name +
         "\" monitor is enabled in the ds_config but is not available "
         "in dsx (it needs its Python client and a network service); its events are not sent. "
         "Enable \"tensorboard\" or \"csv_monitor\" to keep them in files. Training goes on.";
}

MonitorMaster::MonitorMaster(const MonitorSettings& settings, int rank, std::ostream& notes) {
  enabled_ = settings.tensorboard.enabled || settings.csv_monitor.enabled ||
             settings.wandb_enabled || settings.comet_enabled;
  if (rank != 0) return;
  if (settings.tensorboard.enabled) {
    auto tb = std::make_unique<TensorBoardMonitor>(settings.tensorboard.output_path,
                                                   settings.tensorboard.job_name);
    log_dirs_.push_back(tb->log_dir());
    sinks_.push_back(std::move(tb));
  }
  if (settings.csv_monitor.enabled) {
    auto csv = std::make_unique<CsvMonitor>(settings.csv_monitor.output_path,
                                            settings.csv_monitor.job_name);
    log_dirs_.push_back(csv->log_dir());
    sinks_.push_back(std::move(csv));
  }
  if (settings.wandb_enabled) notes << unavailable_monitor_note("wandb") << "\n";
  if (settings.comet_enabled) notes << unavailable_monitor_note("comet") << "\n";
}

void MonitorMaster::write_events(std::span<const Event> events) {
  for (auto& sink : sinks_) sink->write_events(events);
}

void MonitorMaster::flush() {
  for (auto& sink : sinks_) sink->flush();
}

std::vector<std::string> MonitorMaster::log_dirs() const { return log_dirs_; }

}  // namespace dsx::engine::monitor
