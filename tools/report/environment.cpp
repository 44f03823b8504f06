// probe_environment: runs every probe once. Each probe catches its own trouble and records it
// as text, so the report always completes.
#include "tools/report/environment.h"

#include "tools/report/cuda_libraries.h"
#include "tools/report/fabric_providers.h"
#include "tools/report/gpu_topology.h"
#include "tools/report/host_info.h"

// A CUDA build records the header versions it was compiled against, to compare with what loads.
#if defined(DSX_HAVE_CUDA) && __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#endif
#if defined(DSX_HAVE_CUDA) && __has_include(<nccl.h>)
#include <nccl.h>
#endif
#if defined(DSX_HAVE_CUDA) && __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#endif

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
#ifdef CUDART_VERSION
  b.cudart_code = CUDART_VERSION;
#endif
#ifdef NCCL_VERSION_CODE
  b.nccl_code = NCCL_VERSION_CODE;
#endif
#ifdef CUDNN_VERSION
  b.cudnn_code = CUDNN_VERSION;
#endif
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
