// One timeline of every rank: the rank<r>.trace.json files of a --profile directory joined into
// one Chrome trace (each rank stays its own process), for viewers that open one file at a time
// (Perfetto, chrome://tracing).
#pragma once

#include <string>
#include <vector>

namespace dsx::trace {

// The rank files in `dir`, in rank order; throws dsx::Error(Io) when there are none.
std::vector<std::string> rank_trace_files(const std::string& dir);

// Writes the merged trace to `out`; returns the number of spans. Throws dsx::Error(Format)
// naming the file that is not a trace.
size_t merge_traces(const std::vector<std::string>& files, const std::string& out);

}  // namespace dsx::trace
