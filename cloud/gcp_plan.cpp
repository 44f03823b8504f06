// GCP plans. Every call names the project and runs with --quiet, so gcloud never waits on a prompt.
#include "cloud/gcp_plan.h"

namespace dsx::cloud {

namespace {

std::vector<std::string> gcloud(const GcpClusterOptions& o, std::vector<std::string> words) {
  std::vector<std::string> argv = {"gcloud"};
  argv.insert(argv.end(), words.begin(), words.end());
  argv.push_back("--project=" + o.project);
  argv.push_back("--quiet");
  return argv;
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

std::vector<std::string> template_command(const GcpClusterOptions& o) {
  const auto& type = gcp_machine_type(o.machine_type);
  const std::string name = gcp_resource_name(o);
  std::vector<std::string> words = {
      "compute",
      "instance-templates",
      "create",
      name,
      "--machine-type=" + o.machine_type,
      "--maintenance-policy=TERMINATE",
      "--restart-on-failure",
      "--boot-disk-size=" + std::to_string(o.boot_disk_gb) + "GB",
      "--boot-disk-type=" +
          (o.boot_disk_type.empty() ? std::string(type.boot_disk_type) : o.boot_disk_type),
      "--region=" + gcp_region(o),
      "--network-interface=nic-type=GVNIC,network=" + o.network + ",subnet=" + o.subnet,
  };
  for (int nic = 1; nic <= type.gpu_nics; ++nic) {
    const std::string net = gcp_gpu_network(o, nic);
    words.push_back("--network-interface=nic-type=GVNIC,network=" + net + ",subnet=" + net +
                    ",no-address");
  }
  if (o.image.empty()) {
    words.push_back("--image-project=" + o.image_project);
    words.push_back("--image-family=" + o.image_family);
  } else {
    words.push_back("--image=" + o.image);
  }
  words.push_back("--metadata=install-nvidia-driver=True,dsx-cluster=" + o.cluster);
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

}  // namespace

std::string gcp_startup_script_path(const GcpClusterOptions& o) {
  return o.out_dir + "/gcp/startup.sh";
}

Plan gcp_up_plan(const GcpClusterOptions& o) {
  const auto& type = gcp_machine_type(o.machine_type);
  const std::string name = gcp_resource_name(o);
  Plan plan{"dsx cloud gcp up: " + std::to_string(o.count) + " x " + o.machine_type + " in " +
                o.zone + " as cluster " + o.cluster,
            {}};
  plan.steps.push_back({"enable the Compute Engine and Secret Manager APIs",
                        gcloud(o, {"services", "enable", "compute.googleapis.com",
                                   "secretmanager.googleapis.com"})});
  add_gpu_networks(plan, o, type.gpu_nics);
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
    Step s{std::move(what), gcloud(o, std::move(words))};
    s.may_fail = true;
    plan.steps.push_back(s);
  };
  may_fail("delete instance template " + name, {"compute", "instance-templates", "delete", name});
  may_fail("delete placement policy " + name,
           {"compute", "resource-policies", "delete", name, "--region=" + gcp_region(o)});
  may_fail("delete firewall rules",
           {"compute", "firewall-rules", "delete", name + "-internal", name + "-ssh"});
  for (int nic = 1; nic <= type.gpu_nics; ++nic) {
    const std::string net = gcp_gpu_network(o, nic);
    may_fail("delete firewall rule " + net + "-internal",
             {"compute", "firewall-rules", "delete", net + "-internal"});
    may_fail("delete subnet " + net,
             {"compute", "networks", "subnets", "delete", net, "--region=" + gcp_region(o)});
    may_fail("delete VPC " + net, {"compute", "networks", "delete", net});
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
