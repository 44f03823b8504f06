// `--include` / `--exclude`: pick hosts and slots out of the world, with DeepSpeed's grammar
// `NAME[:SLOT[,SLOT...]][@NAME[:SLOT...]...]` and its error messages. dsx follows the documented
// intent where DeepSpeed has bugs: a bare host in --include means all its slots (DeepSpeed
// #6671), and included slots must exist on the host (DeepSpeed accepts any id).
#pragma once

#include <string>

#include "launcher/world.h"

namespace dsx::launcher {

// Applies the filter to `hosts` (every host with its available slots). Both strings empty:
// returns `hosts` unchanged (hosts with no slots kept). Otherwise hosts left without slots are
// dropped, and the result keeps the order of `hosts`. Throws dsx::Error(Usage) on bad input.
World filter_resources(const World& hosts, const std::string& include, const std::string& exclude);

}  // namespace dsx::launcher
