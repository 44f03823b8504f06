// Clock alignment through the store (see clock_alignment.h).
#include "engine/profiling/clock_alignment.h"

#include <chrono>
#include <limits>

namespace dsx::engine {

namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string key(const std::string& prefix, int rank, int round, const char* what) {
  return prefix + "/" + std::to_string(rank) + "/" + std::to_string(round) + "/" + what;
}

}  // namespace

ClockAlignment align_clocks(comm::Store& store, int rank, int world_size, const std::string& prefix, int rounds) {
  ClockAlignment out;
  if (rank == 0) {
    out.origin_ns = now_ns();
    store.set(prefix + "/origin", std::to_string(out.origin_ns));
    for (int r = 1; r < world_size; ++r) {
      for (int i = 0; i < rounds; ++i) {
        store.get(key(prefix, r, i, "ping"), kTimeout);
        store.set(key(prefix, r, i, "pong"), std::to_string(now_ns()));
      }
    }
    return out;
  }
  int64_t best_round_trip = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < rounds; ++i) {
    const int64_t sent = now_ns();
    store.set(key(prefix, rank, i, "ping"), "");
    const int64_t leader = std::stoll(store.get(key(prefix, rank, i, "pong"), kTimeout));
    const int64_t received = now_ns();
    if (received - sent < best_round_trip) {
      best_round_trip = received - sent;
      out.offset_ns = sent + (received - sent) / 2 - leader;
    }
  }
  out.uncertainty_ns = best_round_trip / 2;
  out.origin_ns = std::stoll(store.get(prefix + "/origin", kTimeout)) + out.offset_ns;
  return out;
}

}  // namespace dsx::engine
