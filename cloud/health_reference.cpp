// Bench flags and healthy figures. The sizes are those of the measurements (2 GiB on p4de,
// 16 GiB on p5); the GCP A3 High/Mega figures are all_gather, so the bench runs all_gather there.
#include "cloud/health_reference.h"

#include <array>

namespace dsx::cloud {

namespace {

constexpr const char* kAllReduce2G = "--backend nccl --op allreduce -b 256M -e 2G -f 2";
constexpr const char* kAllReduce16G = "--backend nccl --op allreduce -b 256M -e 16G -f 4";
constexpr const char* kAllGather2G = "--backend nccl --op allgather -b 256M -e 2G -f 2";

constexpr std::array kBenches = {
    HealthBench{"p4d.24xlarge", kAllReduce2G,
                "reference: 2 x p4de (same 4 x 100 Gbps EFA): all_reduce busbw 78.3 GB/s at 2 GiB"},
    HealthBench{"p4de.24xlarge", kAllReduce2G,
                "reference: 2 x p4de: all_reduce busbw 78.3 GB/s at 2 GiB"},
    HealthBench{"p5.48xlarge", kAllReduce16G,
                "reference: 2 x p5: all_reduce busbw 487 GB/s at 16 GiB (343 at 256 MiB)"},
    HealthBench{"a3-highgpu-8g", kAllGather2G,
                "reference: 2 x a3-highgpu-8g (TCPX): all_gather busbw ~50 GB/s"},
    HealthBench{"a3-megagpu-8g", kAllGather2G,
                "reference: 2 x a3-megagpu-8g (TCPXO): all_gather busbw ~188 GB/s"},
};

constexpr HealthBench kDefault{"", kAllReduce2G, ""};

}  // namespace

const HealthBench& health_bench(std::string_view machine) {
  for (const auto& bench : kBenches) {
    if (bench.machine == machine) return bench;
  }
  return kDefault;
}

std::string_view health_reference_line(std::string_view machine) {
  const auto& bench = health_bench(machine);
  return bench.reference.empty() ? "reference: none recorded" : bench.reference;
}

}  // namespace dsx::cloud
