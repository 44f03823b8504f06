// ds_config's offload_optimizer / offload_param / aio -> where ZeRO keeps optimizer state and
// parameters, with DeepSpeed's meaning (ref/lora_qlora_nvme.md §3): device "nvme" swaps the
// optimizer state at stage 3 (at stages 1 and 2 DeepSpeed runs "nvme" as "cpu", and so does
// dsx), and offload_param "nvme" the parameter shards (stage 3 only: DeepSpeed ignores
// offload_param below it); device "cpu" changes nothing on a host rank, whose state is in host
// memory already.
#pragma once

#include <string>
#include <vector>

#include "config/ds_config.h"
#include "zero/zero_options.h"

namespace dsx::engine {

// Sets options.optimizer_nvme / param_nvme where the config swaps, and says what the offload keys do in
// `notes`.
void offload_from(const config::EngineConfig& config, zero::ZeroOptions& options,
                  std::vector<std::string>& notes);

}  // namespace dsx::engine
