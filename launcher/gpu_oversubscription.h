// More ranks on this node than GPUs visible there: CUDA numbers the visible GPUs from 0, so the
// extra ranks land on GPUs that other ranks already use, and NCCL refuses two ranks of one
// communicator on one GPU ("Duplicate GPU detected"). The runner can tell only for the node it
// starts itself (a local launch) and only where it knows the GPUs: CUDA_VISIBLE_DEVICES or a
// detected count. Pure, so that tests give it any machine.
#pragma once

#include <optional>
#include <string>

#include "launcher/launch_plan.h"

namespace dsx::launcher {

// The warning to print (once, on stderr) for this plan on this machine, or nothing.
std::optional<std::string> gpu_oversubscription_warning(const LaunchPlan& plan, const LocalMachine& machine);

}  // namespace dsx::launcher
