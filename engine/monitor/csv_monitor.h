// DeepSpeed's csv_monitor, file for file: under <output_path>/<job_name>/ one CSV per event name,
// named after the event with '/' and ' ' turned into '_' (Train_Samples_lr.csv), a header row
// "step,<last part of the name>" the first time this process writes the file, then "step,value"
// rows. Files are appended to, as DeepSpeed's are (a resumed run adds a second header), rows end
// in "\r\n" (Python's csv module) and values are printed as Python prints floats.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "engine/monitor/event.h"

namespace dsx::engine::monitor {

class CsvMonitor : public EventSink {
 public:
  // Creates the directory; throws dsx::Error(Io) naming it when that fails.
  CsvMonitor(const std::string& output_path, const std::string& job_name);
  ~CsvMonitor() override;
  CsvMonitor(const CsvMonitor&) = delete;
  CsvMonitor& operator=(const CsvMonitor&) = delete;

  void write_events(std::span<const Event> events) override;
  void flush() override;  // after every write_events as well

  const std::string& log_dir() const { return log_dir_; }
  static std::string file_name(const std::string& event_name);  // "Train_Samples_lr.csv"

 private:
  std::FILE* file_for(const std::string& event_name);

  std::string log_dir_;
  std::map<std::string, std::FILE*> files_;
};

}  // namespace dsx::engine::monitor
