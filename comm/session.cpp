// Backend choice and the environment's settings for communicators (see session.h, communicator.h).
#include "comm/session.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "comm/ofi/ofi_communicator.h"
#include "comm/store/secret.h"
#ifdef DSX_HAVE_CUDA
#include "comm/nccl/nccl_communicator.h"
#endif

namespace dsx::comm {

namespace {

long positive_env(const char* name, long fallback) {
  const char* raw = std::getenv(name);
  if (!raw || !*raw) return fallback;
  char* end = nullptr;
  long value = std::strtol(raw, &end, 10);
  if (*end != '\0' || value <= 0) {
    throw Error(ErrorKind::Usage, std::string(name) + "='" + raw + "' is not a positive integer");
  }
  return value;
}

}  // namespace

CommOptions comm_options_from_environment(CommOptions base) {
  if (long minutes = positive_env("DEEPSPEED_TIMEOUT", 0)) base.timeout = std::chrono::minutes(minutes);
  // NCCL_TIMEOUT is no NCCL setting, but job scripts set it (in seconds) meaning this one.
  if (long seconds = positive_env("NCCL_TIMEOUT", 0)) base.timeout = std::chrono::seconds(seconds);
  if (long seconds = positive_env("DSX_COMM_TIMEOUT", 0)) base.timeout = std::chrono::seconds(seconds);
  if (const char* backend = std::getenv("DSX_COMM_BACKEND"); backend && *backend) base.backend = backend;
  if (const char* provider = std::getenv("DSX_OFI_PROVIDER"); provider && *provider) base.provider = provider;
  if (const char* shm = std::getenv("DSX_COMM_SHARED_MEMORY"); shm && *shm) {
    std::string v = shm;
    if (v != "0" && v != "1") throw Error(ErrorKind::Usage, "DSX_COMM_SHARED_MEMORY='" + v + "' must be 0 (off) or 1 (on)");
    base.shared_memory = v == "1";
  }
  if (const char* in_place = std::getenv("DSX_COMM_IN_PLACE"); in_place && *in_place) {
    std::string v = in_place;
    if (v != "0" && v != "1") throw Error(ErrorKind::Usage, "DSX_COMM_IN_PLACE='" + v + "' must be 0 (off) or 1 (on)");
    if (v == "0") base.shared_memory_in_place_bytes = SIZE_MAX;
  }
  return base;
}

std::unique_ptr<Communicator> make_communicator(Rendezvous& rv, const CommOptions& options) {
  std::string backend = options.backend;
  // "auto" follows where the buffers live: ZeRO's callers resolve it (engine/arrangement.h);
  // whoever leaves it unresolved gets host-memory collectives.
  if (backend == "auto") backend = options.buffers_on_gpu ? "nccl" : "ofi";
  if (backend == "ofi") return ofi::create_ofi_world(rv, options);
  if (backend == "nccl") {
#ifdef DSX_HAVE_CUDA
    return nccl::create_nccl_world(rv, options);
#else
    throw Error(ErrorKind::Unsupported, "the nccl backend needs a CUDA build of dsx (this one is CPU-only); use "
                                        "backend ofi or rebuild with -DDSX_CUDA=ON");
#endif
  }
  throw Error(ErrorKind::Usage, "unknown communication backend '" + backend + "' (choose ofi, nccl or auto)");
}

Session::Session(const RankEnv& env, const CommOptions& options) {
  rendezvous_ = std::make_unique<Rendezvous>(env, store_timeout_from_environment(), store_secret_from_env());
  world_ = make_communicator(*rendezvous_, options);
}

Session::~Session() {
  world_.reset();
  rendezvous_.reset();
}

}  // namespace dsx::comm
