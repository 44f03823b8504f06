// Shared storage for a GCP cluster (docs/cloud.md section 6): a Filestore instance on the cluster's
// primary VPC, mounted over NFS at --shared-dir by every VM. Its address reaches the VMs as the
// instance metadata value dsx-shared-source ("<ip>:/shared").
#pragma once

#include "cloud/gcp_cluster.h"
#include "cloud/plan.h"

namespace dsx::cloud {

bool gcp_has_storage(const GcpClusterOptions& options);
// Throws dsx::Error(Usage) naming the flag: kind, tier and the tier's capacity range.
void validate_gcp_storage(const GcpClusterOptions& options);

// Up, before the instance template: creates the instance (gcloud waits until it is READY) and
// captures its address as FILESTORE_IP.
void add_gcp_storage_create(Plan& plan, const GcpClusterOptions& options);
// What the VMs mount: "${FILESTORE_IP}:/shared" (filled by up), "" without storage.
std::string gcp_shared_source(const GcpClusterOptions& options);
// Down, after the VMs are gone; none with --keep-storage.
void add_gcp_storage_delete(Plan& plan, const GcpClusterOptions& options);

}  // namespace dsx::cloud
