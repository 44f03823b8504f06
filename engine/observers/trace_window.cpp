// Traced windows (see trace_window.h).
#include "engine/observers/trace_window.h"

#include <filesystem>

#include "dsx/error.h"
#include "engine/profiling/window_summary.h"
#include "trace/chrome_trace.h"

namespace dsx::engine {

namespace {

constexpr auto kSummaryTimeout = std::chrono::seconds(60);

}  // namespace

TraceWindow::TraceWindow(TraceSettings settings, int rank, int world_size, comm::Store& store,
                         std::function<zero::CommTiming()> comm_timing, Say say, int64_t steps_before)
    : settings_(std::move(settings)), rank_(rank), world_(world_size), store_(store),
      comm_timing_(std::move(comm_timing)), say_(std::move(say)),
      file_(settings_.dir + "/rank" + std::to_string(rank) + ".trace.json"), steps_before_(steps_before) {
  std::error_code ec;
  std::filesystem::create_directories(settings_.dir, ec);
  if (ec) throw Error(ErrorKind::Io, "--profile " + settings_.dir + ": cannot create the directory: " + ec.message());
  clock_ = align_clocks(store_, rank_, world_, "dsx/trace/clock");
  trace::Recorder& recorder = trace::Recorder::instance();
  recorder.set_capacity(capacity_);
  trace::name_this_thread("training");
  main_track_ = recorder.thread_track();
  enter(trace::step_action(settings_.schedule, 0));
}

TraceWindow::~TraceWindow() { trace::Recorder::instance().stop(); }

// The recorder's state for the step about to run. A window's spans begin with its first active
// step: the warm-up's are thrown away.
void TraceWindow::enter(trace::StepAction next) {
  trace::Recorder& recorder = trace::Recorder::instance();
  const bool next_active = next == trace::StepAction::Record || next == trace::StepAction::RecordAndSave;
  if (next == trace::StepAction::Warmup && current_ != trace::StepAction::Warmup) recorder.clear();
  if (next_active && current_ != trace::StepAction::Record) {
    recorder.clear();
    window_first_step_ = steps_before_ + index_ + 1;
    timing_at_start_ = comm_timing_();
  }
  if (next == trace::StepAction::Skip) {
    recorder.stop();
  } else {
    recorder.start();
  }
  current_ = next;
}

void TraceWindow::after_step(const StepEvent& event) {
  const bool active = current_ == trace::StepAction::Record || current_ == trace::StepAction::RecordAndSave;
  ++index_;
  if (active && (current_ == trace::StepAction::RecordAndSave || event.last)) {
    trace::Recorder::instance().stop();
    save_window(event.step.global_step);
    current_ = trace::StepAction::Skip;
  }
  enter(event.last ? trace::StepAction::Skip : trace::step_action(settings_.schedule, index_));
}

void TraceWindow::save_window(int64_t last_step) {
  trace::Recorder& recorder = trace::Recorder::instance();
  std::vector<trace::Event> window = recorder.events();
  const size_t dropped = recorder.dropped();
  recorder.clear();
  RankWindow totals = rank_window(window, main_track_, rank_);
  const zero::CommTiming timing = comm_timing_();
  totals.comm_busy_seconds = timing.busy_seconds - timing_at_start_.busy_seconds;
  totals.comm_exposed_seconds = timing.exposed_seconds - timing_at_start_.exposed_seconds;
  for (auto& e : window) {
    if (kept_.size() >= capacity_) break;
    kept_.push_back(std::move(e));
  }
  trace::TraceFileInfo info;
  info.rank = rank_;
  info.world_size = world_;
  info.origin_ns = clock_.origin_ns;
  info.clock_offset_us = static_cast<double>(clock_.offset_ns) / 1e3;
  info.clock_uncertainty_us = static_cast<double>(clock_.uncertainty_ns) / 1e3;
  info.dropped = dropped;
  trace::write_chrome_trace(file_, kept_, recorder.tracks(), info);
  const std::string key = "dsx/trace/window/" + std::to_string(windows_) + "/";
  store_.set(key + std::to_string(rank_), to_text(totals));
  ++windows_;
  if (rank_ == 0) print_summary(last_step);
}

void TraceWindow::print_summary(int64_t last_step) {
  const std::string key = "dsx/trace/window/" + std::to_string(windows_ - 1) + "/";
  std::vector<RankWindow> ranks;
  for (int r = 0; r < world_; ++r) {
    ranks.push_back(rank_window_from_text(store_.get(key + std::to_string(r), kSummaryTimeout)));
  }
  for (const std::string& line : format_window_summary(ranks, window_first_step_, last_step)) say_(line);
  say_("trace written: " + settings_.dir + "/rank<r>.trace.json (open in https://ui.perfetto.dev or chrome://tracing)");
}

}  // namespace dsx::engine
