// GCP pre-flight (shared/ref/cluster_storage_preflight.md 4.2): the machine type exists in the
// zone, the region's GPU quota (its PREEMPTIBLE_ variant with --spot) covers --count VMs, and a
// given reservation is READY, of the machine type and large enough, and the image is READY.
#pragma once

#include <string>
#include <vector>

#include "cloud/gcp_cluster.h"
#include "cloud/plan.h"
#include "cloud/preflight.h"

namespace dsx::cloud {

// The regional quota metric of the machine's GPUs (NVIDIA_H100_GPUS, ...), PREEMPTIBLE_... for
// spot VMs.
std::string gcp_gpu_quota_metric(const GcpClusterOptions& options);

// What the read-only calls printed (JSON); "" for a call not made or failed.
struct GcpPreflightAnswers {
  std::string machine_json;      // gcloud compute machine-types describe
  std::string region_json;       // gcloud compute regions describe
  std::string reservation_json;  // gcloud compute reservations describe (with a reservation)
};

std::vector<Finding> gcp_preflight_findings(const GcpClusterOptions& options,
                                            const GcpPreflightAnswers& answers);

// The read-only steps; the last of the findings' steps judges them (report_findings to stderr).
// Then the image check (--image, or the family's newest image, is READY), which the printed
// script makes too.
void add_gcp_preflight(Plan& plan, const GcpClusterOptions& options);

}  // namespace dsx::cloud
