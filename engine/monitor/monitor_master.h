// The monitors a ds_config asks for, behind one EventSink — DeepSpeed's MonitorMaster. Only rank
// 0 writes. tensorboard and csv_monitor are written natively; wandb and comet need their Python
// clients and a network, which dsx does not have: when they are enabled dsx says so once at start
// and names the file monitor to use instead, and the run goes on.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/monitor/event.h"

namespace dsx::engine::monitor {

// The ds_config blocks `tensorboard`, `csv_monitor`, `wandb`, `comet` (ref/ds_config.md §6.4).
struct FileMonitorSettings {
  bool enabled = false;
  std::string output_path;  // "" = the current directory
  std::string job_name = "DeepSpeedJobName";
};

struct MonitorSettings {
  FileMonitorSettings tensorboard;
  FileMonitorSettings csv_monitor;
  bool wandb_enabled = false;
  bool comet_enabled = false;
};

class MonitorMaster : public EventSink {
 public:
  // On rank 0 creates the enabled monitors (their directories and files) and writes the notes
  // about wandb/comet to `notes`. On other ranks it is an empty sink.
  MonitorMaster(const MonitorSettings& settings, int rank, std::ostream& notes);

  // Any monitor enabled in the config (DeepSpeed's monitor.enabled), on any rank.
  bool enabled() const { return enabled_; }
  void write_events(std::span<const Event> events) override;
  void flush() override;
  // The directories written to (for the final summary).
  std::vector<std::string> log_dirs() const;

 private:
  bool enabled_ = false;
  std::vector<std::unique_ptr<EventSink>> sinks_;
  std::vector<std::string> log_dirs_;
};

// The note printed for an enabled monitor dsx can not run ("wandb" or "comet").
std::string unavailable_monitor_note(const std::string& name);

}  // namespace dsx::engine::monitor
