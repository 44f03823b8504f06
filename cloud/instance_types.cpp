// The instance and machine tables (sources in shared/ref/cloud.md 1.1, 1.3, 2.1, 2.2).
#include "cloud/instance_types.h"

#include <array>

#include "dsx/error.h"

namespace dsx::cloud {

namespace {

// p4d/p4de: 4 cards x 100 Gbps EFA; p5/p5e: 32 x 100 Gbps; p5en: 16 x 200 Gbps (EFA v3).
constexpr std::array kAws = {
    AwsInstanceType{"p4d.24xlarge", "A100 40GB", 8, 4, 100, true, 8},
    AwsInstanceType{"p4de.24xlarge", "A100 80GB", 8, 4, 100, true, 8},
    AwsInstanceType{"p5.48xlarge", "H100 80GB", 8, 32, 100, true, 8},
    AwsInstanceType{"p5e.48xlarge", "H200 141GB", 8, 32, 100, true, 8},
    AwsInstanceType{"p5en.48xlarge", "H200 141GB", 8, 16, 200, true, 8},
};

// A2 has one NIC and no GPUDirect path; A3 High adds 4 GPU NICs (TCPX), A3 Mega 8 (TCPXO), A3
// Ultra 8 ConnectX-7 RoCE NICs (RDMA). A3 Ultra boots from Hyperdisk only.
constexpr std::array kGcp = {
    GcpMachineType{"a2-highgpu-8g", "A100 40GB", 8, 0, GpuDirect::None, "pd-balanced"},
    GcpMachineType{"a2-megagpu-16g", "A100 40GB", 16, 0, GpuDirect::None, "pd-balanced"},
    GcpMachineType{"a2-ultragpu-8g", "A100 80GB", 8, 0, GpuDirect::None, "pd-balanced"},
    GcpMachineType{"a3-highgpu-8g", "H100 80GB", 8, 4, GpuDirect::Tcpx, "pd-balanced"},
    GcpMachineType{"a3-megagpu-8g", "H100 80GB", 8, 8, GpuDirect::Tcpxo, "pd-balanced"},
    GcpMachineType{"a3-ultragpu-8g", "H200 141GB", 8, 8, GpuDirect::Rdma, "hyperdisk-balanced",
                   /*on_demand=*/false},
};

template <typename Table>
const auto& find_by_name(const Table& table, std::string_view name, const char* what) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry;
  }
  std::string known;
  for (const auto& entry : table) known += (known.empty() ? "" : ", ") + std::string(entry.name);
  throw Error(ErrorKind::Usage, std::string("unknown ") + what + " '" + std::string(name) +
                                    "': dsx has templates for " + known);
}

}  // namespace

std::span<const AwsInstanceType> aws_instance_types() { return kAws; }
std::span<const GcpMachineType> gcp_machine_types() { return kGcp; }

const AwsInstanceType& aws_instance_type(std::string_view name) {
  return find_by_name(kAws, name, "AWS instance type");
}

const GcpMachineType& gcp_machine_type(std::string_view name) {
  // A machine GCP sells that dsx cannot set up yet: say why rather than "unknown".
  if (name == "a4-highgpu-8g") {
    throw Error(
        ErrorKind::Unsupported,
        "a4-highgpu-8g (B200) needs its own image, driver and gIB plugin build, which dsx's GCP "
        "templates do not set up yet; for GPUDirect RDMA over RoCE use a3-ultragpu-8g (H200), or "
        "create the cluster with Google's Cluster Toolkit and run `dsx launch` on it");
  }
  return find_by_name(kGcp, name, "GCP machine type");
}

const char* to_string(GpuDirect path) {
  switch (path) {
    case GpuDirect::None: return "none";
    case GpuDirect::Tcpx: return "tcpx";
    case GpuDirect::Tcpxo: return "tcpxo";
    case GpuDirect::Rdma: return "rdma";
  }
  return "none";
}

}  // namespace dsx::cloud
