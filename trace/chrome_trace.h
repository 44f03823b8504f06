// Spans as a Chrome trace event file (the JSON format Perfetto, chrome://tracing and
// TensorBoard's trace viewer open): one process per rank ("pid" = rank), one thread per track.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/recorder.h"

namespace dsx::trace {

struct TraceFileInfo {
  int rank = 0;
  int world_size = 1;
  int64_t origin_ns = 0;  // this rank's steady clock when rank 0's clock read the run's time 0
  double clock_offset_us = 0;       // this rank's clock minus rank 0's
  double clock_uncertainty_us = 0;  // half the round trip of the best measurement
  size_t dropped = 0;               // spans not kept (the recorder was full)
};

std::string chrome_trace_json(const std::vector<Event>& events, const std::vector<Track>& tracks,
                              const TraceFileInfo& info);

// Writes next to `path` and renames over it, so a reader never sees half a file; throws
// dsx::Error(Io) naming the path when it cannot.
void write_chrome_trace(const std::string& path, const std::vector<Event>& events, const std::vector<Track>& tracks,
                        const TraceFileInfo& info);

}  // namespace dsx::trace
