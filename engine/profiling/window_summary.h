// What rank 0 prints at the end of a traced window: per phase, the min / median / max over the
// ranks (per step), the straggler (the rank whose compute - step time less its waits for other
// ranks - is more than 10% above the median), and the share of communication hidden behind
// compute. Each rank reduces its own spans to a RankWindow; rank 0 gathers them through the store.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/recorder.h"

namespace dsx::engine {

struct RankWindow {
  int rank = 0;
  int steps = 0;
  double step_seconds = 0;             // the step spans (trace::kStepName)
  double wait_seconds = 0;             // "wait" spans: the rank waited for the others
  std::map<std::string, double> phases;  // "phase" spans by name, seconds
  double comm_busy_seconds = 0;        // gradient reductions: on the wire
  double comm_exposed_seconds = 0;     // of which the host waited for
  double compute_seconds() const { return step_seconds - wait_seconds; }
};

// This rank's window from the spans of its training thread (`main_track`).
RankWindow rank_window(const std::vector<trace::Event>& events, int main_track, int rank);

std::string to_text(const RankWindow& window);  // one line, for the store
RankWindow rank_window_from_text(const std::string& text);

struct Straggler {
  int rank = 0;
  double above_median = 0;  // 0.25: compute 25% above the median
};
std::optional<Straggler> find_straggler(const std::vector<RankWindow>& ranks, double threshold = 0.10);

// The lines rank 0 prints (steps first_step..last_step of the run).
std::vector<std::string> format_window_summary(const std::vector<RankWindow>& ranks, int64_t first_step,
                                               int64_t last_step);

}  // namespace dsx::engine
