// The closing summary's rows of what rank 0 held and how much gradient traffic it sent.
#pragma once

#include "engine/progress/progress_display.h"
#include "zero/zero_engine.h"

namespace dsx::engine {

// "rank 0 holds" (ZeRO's memory ledger) and, with more than one rank, "gradient comm".
void add_resource_rows(progress::RunSummary& summary, zero::ZeroEngine& zero, int ranks);

}  // namespace dsx::engine
