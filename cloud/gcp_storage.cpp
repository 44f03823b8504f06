// Filestore steps of the GCP plans (shared/ref/cluster_storage_preflight.md 3.1): the instance
// is named dsx-<cluster>, has one file share "shared" and lives in the cluster's zone.
#include "cloud/gcp_storage.h"

#include "cloud/cluster_flags.h"
#include "cloud/gcp_plan.h"
#include "dsx/error.h"

namespace dsx::cloud {

namespace {

constexpr const char* kShare = "shared";

// The capacity range of each tier dsx offers, in GiB (Filestore service tiers).
struct Tier {
  const char* name;
  int min_gb, max_gb;
};
constexpr Tier kTiers[] = {
    {"BASIC_HDD", 1024, 65434}, {"BASIC_SSD", 2560, 65434}, {"ZONAL", 1024, 102400}};

}  // namespace

bool gcp_has_storage(const GcpClusterOptions& o) { return o.storage != "none"; }

void validate_gcp_storage(const GcpClusterOptions& o) {
  if (o.storage != "none" && o.storage != "filestore") {
    throw Error(ErrorKind::Usage, "--storage must be filestore or none, got '" + o.storage + "'");
  }
  validate_shared_dir(o.shared_dir);
  if (o.storage == "none") return;
  for (const auto& tier : kTiers) {
    if (o.filestore_tier != tier.name) continue;
    if (o.storage_gb >= tier.min_gb && o.storage_gb <= tier.max_gb) return;
    throw Error(ErrorKind::Usage, "--storage-gb " + std::to_string(o.storage_gb) + " does not fit " +
                                      tier.name + ", which takes " + std::to_string(tier.min_gb) +
                                      " to " + std::to_string(tier.max_gb) + " GiB");
  }
  throw Error(ErrorKind::Usage, "--filestore-tier must be BASIC_HDD, BASIC_SSD or ZONAL, got '" +
                                    o.filestore_tier + "'");
}

void add_gcp_storage_create(Plan& plan, const GcpClusterOptions& o) {
  if (!gcp_has_storage(o)) return;
  const std::string name = gcp_resource_name(o);
  Step create{"create Filestore " + name + " (" + o.filestore_tier + ", " +
                  std::to_string(o.storage_gb) + " GiB) on " + o.network + " (the call returns once it is ready)",
              gcloud_command(o, {"filestore", "instances", "create", name, "--zone=" + o.zone,
                                 "--tier=" + o.filestore_tier,
                                 std::string("--file-share=name=") + kShare +
                                     ",capacity=" + std::to_string(o.storage_gb) + "GiB",
                                 "--network=name=" + o.network,
                                 "--labels=dsx-cluster=" + o.cluster})};
  create.timeout_s = 2400;
  plan.steps.push_back(create);
  plan.steps.push_back(
      {"read its address for the VMs",
       gcloud_command(o, {"filestore", "instances", "describe", name, "--zone=" + o.zone,
                          "--format=value(networks[0].ipAddresses[0])"}),
       "FILESTORE_IP"});
}

std::string gcp_shared_source(const GcpClusterOptions& o) {
  return gcp_has_storage(o) ? std::string("${FILESTORE_IP}:/") + kShare : "";
}

void add_gcp_storage_delete(Plan& plan, const GcpClusterOptions& o) {
  if (!gcp_has_storage(o) || o.keep_storage) return;
  Step remove{"delete Filestore " + gcp_resource_name(o) + " and the data on it",
              gcloud_command(o, {"filestore", "instances", "delete", gcp_resource_name(o),
                                 "--zone=" + o.zone})};
  remove.may_fail = true;
  remove.timeout_s = 1800;
  plan.steps.push_back(remove);
}

}  // namespace dsx::cloud
