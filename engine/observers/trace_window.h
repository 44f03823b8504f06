// `dsx train --profile DIR`: records spans in the steps the schedule picks (torch.profiler's
// wait/warmup/active/repeat), writes DIR/rank<r>.trace.json at the end of every active window
// (all windows so far, so a killed run keeps what it recorded), and has rank 0 print the
// window's summary over all ranks (engine/profiling/window_summary.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "engine/observers/step_observer.h"
#include "engine/profiling/clock_alignment.h"
#include "trace/recorder.h"
#include "trace/schedule.h"
#include "zero/zero_options.h"

namespace dsx::engine {

struct TraceSettings {
  std::string dir;
  trace::ProfileSchedule schedule;
};

class TraceWindow final : public StepObserver {
 public:
  // Every rank makes one, on its training thread, before the first step: the clocks are aligned
  // here (a collective over the store). `steps_before`: steps trained before this run (resume).
  TraceWindow(TraceSettings settings, int rank, int world_size, comm::Store& store,
              std::function<zero::CommTiming()> comm_timing, Say say, int64_t steps_before);
  ~TraceWindow() override;
  void after_step(const StepEvent& event) override;

  std::string file() const { return file_; }

 private:
  void enter(trace::StepAction next);
  void save_window(int64_t last_step);
  void print_summary(int64_t last_step);

  TraceSettings settings_;
  int rank_, world_;
  comm::Store& store_;
  std::function<zero::CommTiming()> comm_timing_;
  Say say_;
  std::string file_;
  ClockAlignment clock_;
  int main_track_;
  int64_t index_ = 0;  // steps trained in this run
  int64_t steps_before_;
  int64_t window_first_step_ = 0;
  int windows_ = 0;
  trace::StepAction current_ = trace::StepAction::Skip;
  zero::CommTiming timing_at_start_;
  std::vector<trace::Event> kept_;  // the spans of the windows saved so far
  size_t capacity_ = 200000;
};

}  // namespace dsx::engine
