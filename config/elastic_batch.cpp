// The rule of elastic_batch.h.
#include "config/elastic_batch.h"

#include <algorithm>

namespace dsx::config {

std::vector<int64_t> worlds_keeping_batch(int64_t train_batch_size, int64_t up_to) {
  std::vector<int64_t> worlds;
  for (int64_t w = 1; w <= up_to && w <= train_batch_size; ++w)
    if (train_batch_size % w == 0) worlds.push_back(w);
  return worlds;
}

namespace {

std::string list_of(const std::vector<int64_t>& values) {
  std::string s;
  for (int64_t v : values) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

std::string change_line(int64_t T, int64_t old_micro, int64_t old_acc, int64_t old_world,
                        const ElasticBatch& b, int64_t new_world) {
  return "world " + std::to_string(old_world) + " -> " + std::to_string(new_world) +
         " ranks: micro-batch " + std::to_string(old_micro) + " -> " +
         std::to_string(b.micro_batch) + ", gradient accumulation " + std::to_string(old_acc) +
         " -> " + std::to_string(b.accumulation) + " (train_batch_size " + std::to_string(T) +
         " kept)";
}

}  // namespace

ElasticBatch rebatch_for_world(int64_t train_batch_size, int64_t configured_micro,
                               int64_t old_accumulation, int64_t old_world, int64_t new_world) {
  ElasticBatch b;
  const int64_t T = train_batch_size;
  if (T <= 0 || configured_micro <= 0 || new_world <= 0) {
    b.error = "train_batch_size " + std::to_string(T) + ", micro-batch " +
              std::to_string(configured_micro) + " and world size " + std::to_string(new_world) +
              " must all be greater than 0";
    return b;
  }
  if (T % new_world != 0) {
    // Show the candidates around the sizes a job moves between (at least up to 2x the old).
    const int64_t up_to = std::max<int64_t>({2 * old_world, 2 * new_world, 8});
    b.error = "train_batch_size " + std::to_string(T) + " cannot be kept on " +
              std::to_string(new_world) + " ranks (it is not a multiple of " +
              std::to_string(new_world) + "); the world sizes up to " + std::to_string(up_to) +
              " that keep it are " + list_of(worlds_keeping_batch(T, up_to)) +
              ". Run with one of them, or change train_batch_size";
    return b;
  }
  const int64_t per_rank = T / new_world;
  // The largest micro-batch <= the configured one that divides this rank's share (1 always does).
  for (int64_t m = std::min(configured_micro, per_rank); m >= 1; --m) {
    if (per_rank % m == 0) {
      b.micro_batch = m;
      b.accumulation = per_rank / m;
      break;
    }
  }
  b.change = change_line(T, configured_micro, old_accumulation, old_world, b, new_world);
  return b;
}

}  // namespace dsx::config
