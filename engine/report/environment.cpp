// probe_environment: runs every probe once. Each probe catches its own trouble and records it
// as text, so the report always completes.
#include "engine/report/environment.h"

#include "engine/report/cuda_libraries.h"
#include "engine/report/fabric_providers.h"
#include "engine/report/gpu_topology.h"
#include "engine/report/host_info.h"

namespace dsx::report {

namespace {

BuildInfo build_info(const std::string& version) {
  BuildInfo b;
  b.version = version;
#ifdef DSX_HAVE_CUDA
  b.cuda = true;
#endif
#if defined(__clang__)
  b.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  b.compiler = "gcc " __VERSION__;
#else
  b.compiler = "unknown";
#endif
  b.cxx_standard = __cplusplus;
  b.libfabric_header = fabric_header_version();
  return b;
}

}  // namespace

Environment probe_environment(const std::string& dsx_version, int nodes_flag) {
  Environment env;
  env.build = build_info(dsx_version);
  env.cpu = probe_cpu();
  env.cuda = probe_cuda_libraries();
  env.fabric = probe_fabric_providers();
  env.gpus = probe_gpu_topology();
  env.interfaces = network_interfaces();
  env.rdma_devices = rdma_devices();
  env.variables = communication_variables();
  env.job = probe_job(nodes_flag);
  return env;
}

}  // namespace dsx::report
