// See throughput_printer.h.
#include "engine/observers/throughput_printer.h"

#include <chrono>

namespace dsx::engine {

void ThroughputPrinter::after_step(const StepEvent& event) {
  for (int j = 0; j + 1 < gas_; ++j) timer_.stop(event.time, false, false);
  const bool lead = rank_ == 0;
  if (auto line = timer_.stop(event.time, true, lead); line && lead) {
    say_(progress::log_prefix(std::chrono::system_clock::now(), rank_) + *line);
  }
}

}  // namespace dsx::engine
