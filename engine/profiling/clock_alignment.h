// Rank 0's clock as every rank reads it, so that the timelines of different ranks (different
// hosts, different steady clocks) line up: rounds of ping and pong through the rendezvous store,
// keeping the round with the shortest round trip (Cristian's method).
#pragma once

#include <cstdint>
#include <string>

#include "comm/store/store.h"

namespace dsx::engine {

struct ClockAlignment {
  int64_t origin_ns = 0;       // this rank's steady clock when rank 0's read the run's time 0
  int64_t offset_ns = 0;       // this rank's clock minus rank 0's
  int64_t uncertainty_ns = 0;  // half the best round trip: the offset is right to within this
};

// A collective over the store: every rank calls it with the same `prefix` (keys are made under
// it). Rank 0 answers each other rank's pings in rank order.
ClockAlignment align_clocks(comm::Store& store, int rank, int world_size, const std::string& prefix, int rounds = 8);

}  // namespace dsx::engine
