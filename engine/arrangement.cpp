// Where ZeRO lives and which backend it talks over (see arrangement.h).
#include "engine/arrangement.h"

#include "dsx/error.h"

namespace dsx::engine {

Arrangement choose_arrangement(const ArrangementInputs& in) {
  Arrangement a;
  std::string where;
  if (!in.model_on_gpu) {
    where = "ZeRO state in host memory (the model computes on the CPU)";
  } else if (in.offload_optimizer || in.offload_param) {
    where = std::string("ZeRO state in host memory, ZeRO-Offload (") +
            (in.offload_optimizer ? "offload_optimizer" : "offload_param") + ".device cpu)";
  } else if (in.device_resident_supported) {
    a.zero_on_gpu = true;
    where = "ZeRO state in GPU memory (no offload in the config)";
  } else {
    where =
        "ZeRO state in host memory, ZeRO-Offload: this build cannot keep ZeRO in GPU memory, so the "
        "offload arrangement runs although the config asks for none";
  }
  const std::string& request = in.backend_request;
  const bool shared = a.zero_on_gpu && in.ranks_share_a_gpu;
  if (request == "auto" || request.empty()) {
    a.backend = a.zero_on_gpu && !shared ? "nccl" : "ofi";
  } else if (request == "ofi") {
    a.backend = "ofi";
  } else if (request == "nccl") {
    if (!a.zero_on_gpu) {
      throw Error(ErrorKind::Config,
                  "DSX_COMM_BACKEND=nccl, but ZeRO's buffers are in host memory here (" + where +
                      ") and NCCL reads only GPU memory; unset DSX_COMM_BACKEND or set it to ofi");
    }
    a.backend = "nccl";
  } else {
    throw Error(ErrorKind::Usage, "DSX_COMM_BACKEND='" + request + "': choose ofi, nccl or auto");
  }
  const bool chosen = request == "auto" || request.empty();
  const char* why = !chosen  ? " (DSX_COMM_BACKEND)"
                    : shared ? " (ranks share a GPU, which NCCL refuses; ofi stages GPU memory through the host)"
                    : a.zero_on_gpu ? " (the buffers are GPU memory)"
                                    : " (the buffers are host memory)";
  a.summary = where + "; collectives over " + a.backend + why;
  return a;
}

bool device_resident_zero_built() {
#ifdef DSX_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace dsx::engine
