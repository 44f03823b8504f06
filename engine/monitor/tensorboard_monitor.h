// DeepSpeed's tensorboard monitor without Python: a TensorBoard event file written natively, in
// DeepSpeed's place (<output_path>/<job_name>/) with TensorBoard's name
// (events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n>). The file holds TFRecords of
// hand-encoded `tensorboard.Event` protobufs: first {wall_time, file_version "brain.Event:2"}, then
// one {wall_time, step, summary {value {tag, simple_value}}} per scalar, exactly what
// torch.utils.tensorboard's SummaryWriter.add_scalar writes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/monitor/event.h"

namespace dsx::engine::monitor {

// The serialized protobufs (exposed for the tests and for anyone writing other event files).
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(const std::string& tag, float value, int64_t step,
                                double wall_time);

class TensorBoardMonitor : public EventSink {
 public:
  // Creates the directory and the event file; throws dsx::Error(Io) naming them on failure.
  TensorBoardMonitor(const std::string& output_path, const std::string& job_name);
  ~TensorBoardMonitor() override;
  TensorBoardMonitor(const TensorBoardMonitor&) = delete;
  TensorBoardMonitor& operator=(const TensorBoardMonitor&) = delete;

  void write_events(std::span<const Event> events) override;  // then flushes, as DeepSpeed does
  void flush() override;

  const std::string& log_dir() const { return log_dir_; }
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& event_bytes);

  std::string log_dir_;
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace dsx::engine::monitor
