// Facts about the GPU machines dsx provisions: AWS p4d/p4de/p5/p5e/p5en and GCP a2/a3
// (shared/ref/cloud.md sections 1.1 and 2.1). Everything the templates derive from a machine's
// shape (EFA interfaces, extra VPCs, NCCL plugin, slots per host) is read from these tables.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace dsx::cloud {

struct AwsInstanceType {
  std::string_view name;  // "p5.48xlarge"
  std::string_view gpu;   // "H100 80GB"
  int gpus;               // slots per host in the hostfile
  int network_cards;      // one EFA interface per card
  int efa_gbps_per_card;
  bool supports_efa_only;  // secondary cards may take an `efa-only` interface (no IP)
  int nvme_drives;         // local instance-store drives, assembled into RAID0 on /scratch
};

// The NCCL network path a GCP machine offers between hosts: sockets on NIC 0 (A2),
// GPUDirect-TCPX/TCPXO over extra gVNICs with a receive-datapath manager (A3 High/Mega), or
// GPUDirect RDMA over ConnectX-7 RoCE NICs with Google's gIB NCCL plugin (A3 Ultra).
enum class GpuDirect { None, Tcpx, Tcpxo, Rdma };

struct GcpMachineType {
  std::string_view name;  // "a3-highgpu-8g"
  std::string_view gpu;
  int gpus;
  // The NICs after NIC 0 that carry NCCL traffic (0 on A2). TCPX/TCPXO: gVNICs, each in a VPC
  // of its own. RDMA: MRDMA (ConnectX-7) NICs, all in one VPC with the RoCE network profile.
  int gpu_nics;
  GpuDirect gpudirect;
  std::string_view boot_disk_type;  // a type the machine series accepts
  // False where GCP sells no on-demand capacity (A3 Ultra): VMs come from a reservation
  // (provisioning model RESERVATION_BOUND) or are spot VMs.
  bool on_demand = true;
};

std::span<const AwsInstanceType> aws_instance_types();
std::span<const GcpMachineType> gcp_machine_types();

// Look-ups that throw dsx::Error(Usage) naming the supported types when `name` is unknown.
const AwsInstanceType& aws_instance_type(std::string_view name);
const GcpMachineType& gcp_machine_type(std::string_view name);

const char* to_string(GpuDirect path);

}  // namespace dsx::cloud
