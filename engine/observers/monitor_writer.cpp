// See monitor_writer.h.
#include "engine/observers/monitor_writer.h"

#include <vector>

namespace dsx::engine {

void MonitorWriter::after_step(const StepEvent& event) {
  const TrainStep& step = event.step;
  samples_seen_ += step.samples;
  std::vector<monitor::Event> events = {{monitor::names::kTrainLoss, step.loss, samples_seen_},
                                        {monitor::names::kLr, step.lr, samples_seen_}};
  if (config_.fp16.enabled) events.push_back({monitor::names::kLossScale, step.zero.loss_scale, samples_seen_});
  if (config_.wall_clock_breakdown) {
    events.push_back({monitor::names::kForwardMs, step.forward_seconds * 1e3, samples_seen_});
    events.push_back({monitor::names::kBackwardMs, step.backward_seconds * 1e3, samples_seen_});
    events.push_back({monitor::names::kStepMs, step.step_seconds * 1e3, samples_seen_});
  }
  monitors_.write_events(events);
}

}  // namespace dsx::engine
