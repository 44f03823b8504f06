// GCP plans. Every call names the project and runs with --quiet, so gcloud never waits on a prompt.
#include "cloud/gcp_plan.h"

#include "cloud/gcp_preflight.h"
#include "cloud/gcp_storage.h"

namespace dsx::cloud {

namespace {

std::vector<std::string> gcloud(const GcpClusterOptions& o, std::vector<std::string> words) {
  return gcloud_command(o, std::move(words));
}

std::string subnet_range(int nic) { return "192.168." + std::to_string(nic) + ".0/24"; }

void add_gpu_networks(Plan& plan, const GcpClusterOptions& o, int nics) {
  for (int nic = 1; nic <= nics; ++nic) {
    const std::string net = gcp_gpu_network(o, nic);
    plan.steps.push_back(
        {"create VPC " + net + " for GPU NIC " + std::to_string(nic),
         gcloud(o, {"compute", "networks", "create", net, "--subnet-mode=custom", "--mtu=8244"})});
    plan.steps.push_back(
        {"create subnet " + net + " (" + subnet_range(nic) + ")",
         gcloud(o, {"compute", "networks", "subnets", "create", net, "--network=" + net,
                    "--region=" + gcp_region(o), "--range=" + subnet_range(nic)})});
    plan.steps.push_back(
        {"allow traffic between GPU NICs on " + net,
         gcloud(o, {"compute", "firewall-rules", "create", net + "-internal", "--network=" + net,
                    "--action=ALLOW", "--rules=tcp:0-65535,udp:0-65535,icmp",
                    "--source-ranges=192.168.0.0/16"})});
  }
}

// RDMA machines: one VPC with the zone's RoCE network profile and one subnet per MRDMA NIC. Such
// a VPC takes no firewall rules (traffic between its MRDMA NICs is always allowed).
void add_rdma_network(Plan& plan, const GcpClusterOptions& o, int nics) {
  const std::string net = gcp_rdma_network(o);
  plan.steps.push_back(
      {"create RoCE VPC " + net + " for the " + std::to_string(nics) + " MRDMA NICs",
       gcloud(o, {"compute", "networks", "create", net, "--network-profile=" + gcp_rdma_profile(o),
                  "--subnet-mode=custom", "--mtu=8896"})});
  for (int nic = 1; nic <= nics; ++nic) {
    const std::string subnet = gcp_rdma_subnet(o, nic);
    plan.steps.push_back(
        {"create subnet " + subnet + " (" + subnet_range(nic) + ") for MRDMA NIC " +
             std::to_string(nic),
         gcloud(o, {"compute", "networks", "subnets", "create", subnet, "--network=" + net,
                    "--region=" + gcp_region(o), "--range=" + subnet_range(nic)})});
  }
}

// NIC 0 on the primary VPC, then the GPU NICs: gVNICs in VPCs of their own (TCPX/TCPXO) or
// MRDMA NICs in the one RoCE VPC, none with an external address.
void add_network_interfaces(std::vector<std::string>& words, const GcpClusterOptions& o,
                            const GcpMachineType& type) {
  words.push_back("--network-interface=nic-type=GVNIC,network=" + o.network +
                  ",subnet=" + o.subnet);
  for (int nic = 1; nic <= type.gpu_nics; ++nic) {
    const bool rdma = type.gpudirect == GpuDirect::Rdma;
    const std::string net = rdma ? gcp_rdma_network(o) : gcp_gpu_network(o, nic);
    const std::string subnet = rdma ? gcp_rdma_subnet(o, nic) : net;
    words.push_back(std::string("--network-interface=nic-type=") + (rdma ? "MRDMA" : "GVNIC") +
                    ",network=" + net + ",subnet=" + subnet + ",no-address");
  }
}

// Where the VMs' capacity comes from. GPU VMs cannot live-migrate, so every VM stops for host
// maintenance; spot VMs are deleted when preempted and cannot be restarted on failure.
void add_scheduling(std::vector<std::string>& words, const GcpClusterOptions& o,
                    const GcpMachineType& type) {
  words.push_back("--maintenance-policy=TERMINATE");
  if (o.spot) {
    words.push_back("--provisioning-model=SPOT");
    words.push_back("--instance-termination-action=DELETE");
    return;
  }
  words.push_back("--restart-on-failure");
  if (o.reservation.empty()) return;
  words.push_back("--reservation-affinity=specific");
  words.push_back("--reservation=" + o.reservation);
  if (!type.on_demand) {  // such VMs live as long as the reservation they are bound to
    words.push_back("--provisioning-model=RESERVATION_BOUND");
    words.push_back("--instance-termination-action=DELETE");
  }
}

std::vector<std::string> template_command(const GcpClusterOptions& o) {
  const auto& type = gcp_machine_type(o.machine_type);
  const std::string name = gcp_resource_name(o);
  std::vector<std::string> words = {"compute", "instance-templates", "create", name,
                                    "--machine-type=" + o.machine_type};
  add_scheduling(words, o, type);
  words.push_back("--boot-disk-size=" + std::to_string(o.boot_disk_gb) + "GB");
  words.push_back("--boot-disk-type=" +
                  (o.boot_disk_type.empty() ? std::string(type.boot_disk_type) : o.boot_disk_type));
  words.push_back("--region=" + gcp_region(o));
  add_network_interfaces(words, o, type);
  if (o.image.empty()) {
    words.push_back("--image-project=" + o.image_project);
    words.push_back("--image-family=" + o.image_family);
  } else {
    words.push_back("--image=" + o.image);
  }
  words.push_back("--metadata=install-nvidia-driver=True,dsx-cluster=" + o.cluster +
                  (gcp_has_storage(o) ? ",dsx-shared-source=" + gcp_shared_source(o) : ""));
  words.push_back("--metadata-from-file=startup-script=" + gcp_startup_script_path(o));
  words.push_back("--labels=dsx-cluster=" + o.cluster);
  words.push_back("--tags=" + name);
  words.push_back("--scopes=cloud-platform");
  words.push_back("--service-account=" +
                  (o.service_account.empty()
                       ? std::string("${PROJECT_NUMBER}-compute@developer.gserviceaccount.com")
                       : o.service_account));
  words.push_back("--resource-policies=" + name);
  return gcloud(o, words);
}

// Tear-down steps may find their resource gone already (a half-finished up, a second down).
Step may_fail_step(const GcpClusterOptions& o, std::string what, std::vector<std::string> words) {
  Step step{std::move(what), gcloud(o, std::move(words))};
  step.may_fail = true;
  return step;
}

// A VPC can be deleted only once its subnets and firewall rules are gone.
void delete_gpu_networks(Plan& plan, const GcpClusterOptions& o, int nics) {
  for (int nic = 1; nic <= nics; ++nic) {
    const std::string net = gcp_gpu_network(o, nic);
    plan.steps.push_back(may_fail_step(o, "delete firewall rule " + net + "-internal",
                                       {"compute", "firewall-rules", "delete", net + "-internal"}));
    plan.steps.push_back(may_fail_step(
        o, "delete subnet " + net,
        {"compute", "networks", "subnets", "delete", net, "--region=" + gcp_region(o)}));
    plan.steps.push_back(
        may_fail_step(o, "delete VPC " + net, {"compute", "networks", "delete", net}));
  }
}

void delete_rdma_network(Plan& plan, const GcpClusterOptions& o, int nics) {
  for (int nic = 1; nic <= nics; ++nic) {
    const std::string subnet = gcp_rdma_subnet(o, nic);
    plan.steps.push_back(may_fail_step(
        o, "delete subnet " + subnet,
        {"compute", "networks", "subnets", "delete", subnet, "--region=" + gcp_region(o)}));
  }
  plan.steps.push_back(may_fail_step(o, "delete RoCE VPC " + gcp_rdma_network(o),
                                     {"compute", "networks", "delete", gcp_rdma_network(o)}));
}

}  // namespace

std::vector<std::string> gcloud_command(const GcpClusterOptions& o,
                                        std::vector<std::string> words) {
  std::vector<std::string> argv = {"gcloud"};
  argv.insert(argv.end(), words.begin(), words.end());
  argv.push_back("--project=" + o.project);
  argv.push_back("--quiet");
  return argv;
}

std::string gcp_startup_script_path(const GcpClusterOptions& o) {
  return o.out_dir + "/gcp/startup.sh";
}

Plan gcp_up_plan(const GcpClusterOptions& o) {
  const auto& type = gcp_machine_type(o.machine_type);
  const std::string name = gcp_resource_name(o);
  Plan plan{"dsx cloud gcp up: " + std::to_string(o.count) + " x " + o.machine_type + " in " +
                o.zone + " as cluster " + o.cluster,
            {}};
  add_gcp_preflight(plan, o);
  std::vector<std::string> apis = {"services", "enable", "compute.googleapis.com",
                                   "secretmanager.googleapis.com"};
  if (gcp_has_storage(o)) apis.push_back("file.googleapis.com");
  plan.steps.push_back(
      {std::string("enable the Compute Engine, Secret Manager") +
           (gcp_has_storage(o) ? " and Filestore" : "") + " APIs",
       gcloud(o, apis)});
  if (type.gpudirect == GpuDirect::Rdma) {
    add_rdma_network(plan, o, type.gpu_nics);
  } else {
    add_gpu_networks(plan, o, type.gpu_nics);
  }
  plan.steps.push_back({"allow all traffic between the cluster's VMs on " + o.network,
                        gcloud(o, {"compute", "firewall-rules", "create", name + "-internal",
                                   "--network=" + o.network, "--action=ALLOW", "--rules=all",
                                   "--source-tags=" + name, "--target-tags=" + name})});
  plan.steps.push_back({"allow SSH from " + o.ssh_cidr,
                        gcloud(o, {"compute", "firewall-rules", "create", name + "-ssh",
                                   "--network=" + o.network, "--action=ALLOW", "--rules=tcp:22",
                                   "--source-ranges=" + o.ssh_cidr, "--target-tags=" + name})});
  plan.steps.push_back(
      {"create compact placement policy " + name,
       gcloud(o, {"compute", "resource-policies", "create", "group-placement", name,
                  "--collocation=collocated", "--vm-count=" + std::to_string(o.count),
                  "--region=" + gcp_region(o)})});
  plan.steps.push_back(
      {"store the cluster SSH key in Secret Manager",
       gcloud(o,
              {"secrets", "create", gcp_key_secret(o), "--data-file=" + o.out_dir + "/cluster_key",
               "--replication-policy=automatic", "--labels=dsx-cluster=" + o.cluster})});
  std::string member = "serviceAccount:" + o.service_account;
  if (o.service_account.empty()) {
    plan.steps.push_back(
        {"find the project number (names the default compute service account)",
         gcloud(o, {"projects", "describe", o.project, "--format=value(projectNumber)"}),
         "PROJECT_NUMBER"});
    member = "serviceAccount:${PROJECT_NUMBER}-compute@developer.gserviceaccount.com";
  }
  plan.steps.push_back(
      {"let the VMs' service account read the key",
       gcloud(o, {"secrets", "add-iam-policy-binding", gcp_key_secret(o), "--member=" + member,
                  "--role=roles/secretmanager.secretAccessor"})});
  plan.steps.back().quiet = true;
  add_gcp_storage_create(plan, o);
  plan.steps.push_back({"create instance template " + name, template_command(o)});
  Step create{"create all " + std::to_string(o.count) + " VMs in one request",
              gcloud(o, {"compute", "instances", "bulk", "create",
                         "--name-pattern=" + name + "-####", "--count=" + std::to_string(o.count),
                         "--zone=" + o.zone, "--source-instance-template=" + name})};
  create.timeout_s = 1200;
  plan.steps.push_back(create);
  return plan;
}

Plan gcp_down_plan(const GcpClusterOptions& o) {
  const auto& type = gcp_machine_type(o.machine_type);
  const std::string name = gcp_resource_name(o);
  Plan plan{"dsx cloud gcp down: cluster " + o.cluster + " in " + o.zone, {}};
  plan.steps.push_back(
      {"find the cluster's VMs",
       gcloud(o, {"compute", "instances", "list", "--filter=labels.dsx-cluster=" + o.cluster,
                  "--format=value(name)"}),
       "NAMES"});
  plan.steps.back().capture_is_list = true;
  Step remove{"delete them",
              gcloud(o, {"compute", "instances", "delete", "${NAMES}", "--zone=" + o.zone})};
  remove.skip_if_empty = "NAMES";
  remove.timeout_s = 1200;
  plan.steps.push_back(remove);
  auto may_fail = [&](std::string what, std::vector<std::string> words) {
    plan.steps.push_back(may_fail_step(o, std::move(what), std::move(words)));
  };
  add_gcp_storage_delete(plan, o);
  may_fail("delete instance template " + name, {"compute", "instance-templates", "delete", name});
  may_fail("delete placement policy " + name,
           {"compute", "resource-policies", "delete", name, "--region=" + gcp_region(o)});
  may_fail("delete firewall rules",
           {"compute", "firewall-rules", "delete", name + "-internal", name + "-ssh"});
  if (type.gpudirect == GpuDirect::Rdma) {
    delete_rdma_network(plan, o, type.gpu_nics);
  } else {
    delete_gpu_networks(plan, o, type.gpu_nics);
  }
  may_fail("delete the cluster key", {"secrets", "delete", gcp_key_secret(o)});
  return plan;
}

Step gcp_list_step(const GcpClusterOptions& o) {
  return {"list the cluster's VMs",
          gcloud(o, {"compute", "instances", "list", "--filter=labels.dsx-cluster=" + o.cluster,
                     "--format=json"}),
          "LIST_JSON"};
}

}  // namespace dsx::cloud
