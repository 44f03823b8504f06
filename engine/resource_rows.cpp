// The summary's memory and traffic rows (see resource_rows.h).
#include "engine/resource_rows.h"

#include <sstream>

namespace dsx::engine {

void add_resource_rows(progress::RunSummary& summary, zero::ZeroEngine& zero, int ranks) {
  const zero::MemoryLedger& m = zero.memory();
  const zero::CommTiming& c = zero.comm_timing();
  std::ostringstream mem, com;
  mem.precision(6);
  mem << "params " << m.bytes(zero::MemoryKind::Params) / 1e6 << " MB, grads " << m.bytes(zero::MemoryKind::Grads) / 1e6
      << " MB, optimizer " << m.bytes(zero::MemoryKind::OptimizerState) / 1e6 << " MB, activations "
      << m.bytes(zero::MemoryKind::Activations) / 1e6 << " MB (peak buffers " << m.peak(zero::MemoryKind::Buffers) / 1e6
      << " MB, peak total " << m.peak_total() / 1e6 << " MB)";
  summary.extra.push_back({"rank 0 holds", mem.str()});
  if (ranks > 1) {
    com.precision(3);
    com << c.bus_bytes / 1e6 << " MB sent by rank 0 in " << c.operations << " reductions (" << c.reduce_scatters
        << " reduce-scatters), " << static_cast<int>(c.hidden_fraction() * 100 + 0.5) << "% hidden behind backward";
    summary.extra.push_back({"gradient comm", com.str()});
  }
}

}  // namespace dsx::engine
