// Validation of the GCP options and the names derived from them.
#include "cloud/gcp_cluster.h"

#include <cstdio>
#include <regex>

#include "cloud/cluster_flags.h"
#include "cloud/dsx_package.h"
#include "cloud/gcp_storage.h"
#include "dsx/error.h"

namespace dsx::cloud {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorKind::Usage, message);
}

// The images GCP documents for GPUDirect-TCPX (A3 High) and TCPXO (A3 Mega); pin what you test.
constexpr const char* kTcpxPlugin =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9";
constexpr const char* kTcpxRxdm =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12";
constexpr const char* kTcpxoPlugin =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8";
constexpr const char* kTcpxoRxdm =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.14";
// The gIB NCCL plugin installer for GPUDirect RDMA (A3 Ultra); it needs no RXDM.
constexpr const char* kGibPlugin =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.2";

// A reservation's name, or the path of one shared from another project.
bool valid_reservation(const std::string& name) {
  static const std::regex pattern(
      "(projects/[a-z][-a-z0-9.:]*/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?");
  return std::regex_match(name, pattern);
}

// Machines without on-demand capacity only start from a reservation or as spot VMs; refusing
// here is clearer than the capacity error GCP would give after the networks are made.
void validate_capacity(const GcpClusterOptions& o) {
  require(!(o.spot && !o.reservation.empty()),
          "--spot and --reservation exclude each other: spot VMs take no reserved capacity");
  require(o.reservation.empty() || valid_reservation(o.reservation),
          "--reservation must name a reservation (or projects/P/reservations/NAME), got '" +
              o.reservation + "'");
  require(gcp_machine_type(o.machine_type).on_demand || o.spot || !o.reservation.empty(),
          o.machine_type +
              " (A3 Ultra) has no on-demand capacity: its VMs come from a reservation or "
              "are spot VMs; pass --reservation NAME or --spot");
}

}  // namespace

void validate(const GcpClusterOptions& o) {
  validate_cluster_name(o.cluster);
  gcp_machine_type(o.machine_type);
  require(!o.project.empty(), "--project is required (the GCP project id)");
  require(std::regex_match(o.zone, std::regex("[a-z]+-[a-z]+[0-9]+-[a-z]")),
          "--zone must be a zone such as us-central1-a, got '" + o.zone + "'");
  require(o.count >= 1 && o.count <= 1000, "--count must be between 1 and 1000");
  unsigned a, b, c, d, bits;
  char tail;
  require(
      std::sscanf(o.ssh_cidr.c_str(), "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &bits, &tail) == 5 &&
          a < 256 && b < 256 && c < 256 && d < 256 && bits <= 32,
      "--ssh-cidr must be an IPv4 CIDR such as 35.235.240.0/20 (IAP), got '" + o.ssh_cidr + "'");
  require(!o.network.empty() && !o.subnet.empty(), "--network and --subnet must not be empty");
  require(o.boot_disk_gb >= 50 && o.boot_disk_gb <= 65536,
          "--boot-disk-gb must be between 50 and 65536");
  validate_dsx_package(o.dsx_package, "gs://");
  require(!o.out_dir.empty(), "--out must name a directory");
  validate_capacity(o);
  validate_gcp_storage(o);
}

std::string gcp_region(const GcpClusterOptions& o) { return o.zone.substr(0, o.zone.rfind('-')); }
std::string gcp_resource_name(const GcpClusterOptions& o) { return "dsx-" + o.cluster; }
std::string gcp_gpu_network(const GcpClusterOptions& o, int nic) {
  return "dsx-" + o.cluster + "-gpu-" + std::to_string(nic);
}
std::string gcp_rdma_network(const GcpClusterOptions& o) { return "dsx-" + o.cluster + "-rdma"; }
std::string gcp_rdma_subnet(const GcpClusterOptions& o, int nic) {
  return gcp_rdma_network(o) + "-" + std::to_string(nic);
}
std::string gcp_rdma_profile(const GcpClusterOptions& o) { return o.zone + "-vpc-roce"; }
std::string gcp_key_secret(const GcpClusterOptions& o) {
  return "dsx-" + o.cluster + "-cluster-key";
}

std::string gcp_plugin_image(const GcpClusterOptions& o) {
  if (!o.gpudirect_plugin_image.empty()) return o.gpudirect_plugin_image;
  switch (gcp_machine_type(o.machine_type).gpudirect) {
    case GpuDirect::Tcpx:
      return kTcpxPlugin;
    case GpuDirect::Tcpxo:
      return kTcpxoPlugin;
    case GpuDirect::Rdma:
      return kGibPlugin;
    case GpuDirect::None:
      break;
  }
  return "";
}

std::string gcp_rxdm_image(const GcpClusterOptions& o) {
  if (!o.rxdm_image.empty()) return o.rxdm_image;
  auto path = gcp_machine_type(o.machine_type).gpudirect;
  return path == GpuDirect::Tcpx ? kTcpxRxdm : path == GpuDirect::Tcpxo ? kTcpxoRxdm : "";
}

}  // namespace dsx::cloud
