// What the user asks for on GCP (the flags of `dsx cloud gcp ...`) and the names of what dsx
// creates: every resource is dsx-<cluster>[-...] and every VM is labelled dsx-cluster=<cluster>.
#pragma once

#include <string>

#include "cloud/instance_types.h"

namespace dsx::cloud {

struct GcpClusterOptions {
  std::string cluster;
  std::string project;
  std::string zone;  // all VMs in one zone (compact placement)
  std::string machine_type = "a3-highgpu-8g";
  int count = 2;
  std::string network = "default";  // the primary VPC (NIC 0)
  std::string subnet = "default";
  std::string ssh_cidr;
  std::string image_project = "deeplearning-platform-release";
  std::string image_family = "common-cu124-debian-11-py310";
  std::string image;  // a given image (overrides the family)
  int boot_disk_gb = 500;
  std::string boot_disk_type;          // "" = the machine type's default
  std::string service_account;         // "" = the project's default compute service account
  std::string gpudirect_plugin_image;  // "" = the default for TCPX / TCPXO / RDMA (gIB)
  std::string rxdm_image;              // "" = the default for TCPX / TCPXO (RDMA has none)
  // Capacity. A reservation is consumed by name (or projects/P/reservations/NAME for a shared
  // one); spot VMs may be deleted whenever GCP needs the capacity back. At most one of them.
  std::string reservation;
  bool spot = false;
  std::string dsx_package;             // gs:// or https:// tarball of an installed dsx tree
  std::string os_user = "dsx";
  std::string out_dir = "dsx-cloud";
  // Shared storage made with the cluster, mounted at shared_dir on every VM: none or filestore
  // (a Filestore instance on the primary VPC). See cloud/gcp_storage.h.
  std::string storage = "none";
  std::string filestore_tier = "BASIC_SSD";  // BASIC_HDD, BASIC_SSD or ZONAL
  int storage_gb = 2560;                     // BASIC_SSD: 2560 at least; the others 1024
  bool keep_storage = false;                 // down leaves the instance
  std::string shared_dir = "/shared";
};

// Throws dsx::Error(Usage) naming the flag when a value is missing or malformed.
void validate(const GcpClusterOptions& options);

std::string gcp_region(const GcpClusterOptions& options);                // zone without its -letter
std::string gcp_resource_name(const GcpClusterOptions& options);         // dsx-<cluster>
std::string gcp_gpu_network(const GcpClusterOptions& options, int nic);  // dsx-<cluster>-gpu-<nic>
// RDMA machines: the one RoCE VPC (dsx-<cluster>-rdma) and the subnet of MRDMA NIC `nic`, 1..8
// (dsx-<cluster>-rdma-<nic>), and the zone's RDMA network profile (<zone>-vpc-roce).
std::string gcp_rdma_network(const GcpClusterOptions& options);
std::string gcp_rdma_subnet(const GcpClusterOptions& options, int nic);
std::string gcp_rdma_profile(const GcpClusterOptions& options);
std::string gcp_key_secret(const GcpClusterOptions& options);  // dsx-<cluster>-cluster-key
std::string gcp_plugin_image(const GcpClusterOptions& options);
std::string gcp_rxdm_image(const GcpClusterOptions& options);

}  // namespace dsx::cloud
