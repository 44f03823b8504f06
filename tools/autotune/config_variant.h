// The ds_config files `dsx autotune` writes: the user's config with the batch triad and the ZeRO
// stage of one experiment set (every other key kept as written, comments dropped), and, for a
// trial, the autotuning keys that make `dsx train` a profiled run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dsx::autotune {

struct ConfigChoice {
  int stage = 0;
  int64_t micro_batch = 1;
  int64_t accumulation = 1;
  int64_t train_batch_size = 1;  // micro_batch * accumulation * data-parallel ranks
};

struct TrialProfile {
  std::string metric_path;
  int64_t start_profile_step = 0;
  int64_t end_profile_step = 1;
};

// `base_text` is the user's config (comments and trailing commas allowed; `source` names it in
// errors). Returns indented JSON. Throws dsx::Error(Config) when the base is not a JSON object.
std::string config_variant(const std::string& base_text, const std::string& source, const ConfigChoice& choice,
                           const std::optional<TrialProfile>& trial = std::nullopt);

}  // namespace dsx::autotune
