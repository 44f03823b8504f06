// The GPU choice rule (see kernels/device_choice.h).
#include "kernels/device_choice.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "dsx/error.h"

namespace dsx::kernels {

int parse_local_rank(const char* value) {
  if (!value || !*value) return 0;
  char* end = nullptr;
  errno = 0;
  const long rank = std::strtol(value, &end, 10);
  if (*end != '\0' || errno != 0 || rank < 0 || rank > INT_MAX) {
    throw Error(ErrorKind::Usage, std::string("LOCAL_RANK='") + value +
                                      "' is not a non-negative integer; the launcher sets it to the rank's index on its node");
  }
  return static_cast<int>(rank);
}

int choose_device(int local_rank, int visible_devices, bool may_share, const std::string& visible_list) {
  const std::string where = visible_list.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + visible_list + ")";
  if (visible_devices <= 0) {
    throw Error(ErrorKind::Unsupported, "no GPU is visible to this process" + where +
                                            "; check the driver and CUDA_VISIBLE_DEVICES, or train on the CPU");
  }
  if (local_rank < 0) throw Error(ErrorKind::Config, "LOCAL_RANK " + std::to_string(local_rank) + " is negative");
  if (local_rank >= visible_devices && !may_share) {
    throw Error(ErrorKind::Config, "LOCAL_RANK " + std::to_string(local_rank) + " has no GPU: this process sees " +
                                       std::to_string(visible_devices) + " device(s)" + where +
                                       "; start at most that many ranks per node (--num_gpus / slots in the "
                                       "hostfile), or let ranks share GPUs with DSX_COMM_BACKEND=ofi");
  }
  return local_rank % visible_devices;
}

bool ranks_may_share_gpu(const char* comm_backend) {
  return comm_backend && std::string(comm_backend) == "ofi";
}

}  // namespace dsx::kernels
