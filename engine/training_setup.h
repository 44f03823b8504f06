// Turns a resolved config::EngineConfig into what the training pieces take: ZeRO's options (stage,
// buckets, averaging, precision, optimizer) and the learning-rate schedule. Every ds_config key
// that changes training passes through here; what dsx cannot do on this build is refused with
// a message that says what to change.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/ds_config.h"
#include "engine/schedule/lr_schedule.h"
#include "zero/zero_options.h"

namespace dsx::engine {

// `notes` collects what the user should know (e.g. offload on a CPU-only run).
zero::ZeroOptions zero_options_from(const config::EngineConfig& config, std::vector<std::string>& notes);
// What a 16-bit config means for this run, said once at start ("" for fp32): on the CPU the
// model computes in fp32 except where a bf16 kernel exists; on a GPU it computes in the 16-bit type.
std::string precision_note(const config::EngineConfig& config, bool model_on_gpu);

// The scheduler block, or nullopt when there is none (constant lr).
std::optional<LrSchedule> lr_schedule_from(const config::EngineConfig& config);

}  // namespace dsx::engine
