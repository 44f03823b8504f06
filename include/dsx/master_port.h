// The rendezvous port when none is given: torch.distributed's and DeepSpeed's
// (TORCH_DISTRIBUTED_DEFAULT_PORT). The launcher hands it to the ranks and comm/ falls back to it
// on one rank; neither room may use the other, so it is written here once.
#pragma once

namespace dsx {

inline constexpr int kDefaultMasterPort = 29500;

}  // namespace dsx
