// `dsx cloud aws|gcp render|up|status|hostfile|down`: provisions GPU clusters on AWS (p4d/p5,
// EFA) and GCP (a2/a3, GPUDirect-TCPX/O and RDMA) and writes the hostfile for `dsx launch`. The
// work is in cloud/; this file maps flags to options and verbs to plans.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "cloud/aws_plan.h"
#include "cloud/aws_render.h"
#include "cloud/cloud_nodes.h"
#include "cloud/cluster_flags.h"
#include "cloud/gcp_plan.h"
#include "cloud/gcp_render.h"
#include "cloud/health_reference.h"
#include "cloud/node_script.h"
#include "cloud/render_files.h"
#include "dsx/error.h"
#include "dsx/json_input.h"
#include "tools/cli.h"

namespace dsx::tools {

namespace {

using cloud::CloudNode;

constexpr const char* kVerbs = "render|up|status|hostfile|down";

// up returns before the nodes have checked themselves: where the ones that fail will be named.
constexpr const char* kUnhealthyNodesNote =
    "a node that fails its set-up or the cluster bench is named by status and hostfile, and left "
    "out of every hostfile (docs/cloud.md 1.3)\n";

// Flags every verb of both clouds takes.
struct CommonFlags {
  bool dry_run = false;
  std::string hostfile_out;  // hostfile: where to write ("" = <out>/hostfile)
  std::string from_json;     // status/hostfile: read a saved listing instead of calling the CLI
  int expect = 0;            // hostfile: fail unless this many nodes are running
  int wait_s = 0;            // status/hostfile: poll this long for the nodes to report ready
};

void add_common(po::options_description& d, CommonFlags& c, std::string& out) {
  d.add_options()("out", po::value(&out)->default_value(out),
                  "directory for rendered files and the hostfile")(
      "dry-run", po::bool_switch(&c.dry_run), "print each cloud CLI command instead of running it")(
      "hostfile", po::value(&c.hostfile_out),
      "hostfile: where to write it (default <out>/hostfile)")(
      "from-json", po::value(&c.from_json),
      "status/hostfile: parse this saved CLI listing (JSON) instead of calling the CLI")(
      "expect", po::value(&c.expect)->default_value(0),
      "hostfile: fail unless this many nodes are running (default: --count when given)")(
      "wait", po::value(&c.wait_s)->default_value(0),
      "status/hostfile: poll up to this many seconds until --count (or --expect) nodes report "
      "ready");
}

std::string read_file(const std::string& path) { return read_bounded_file(path); }

// `count` is the --count flag when the user gave it, else 0. Status expects `count` nodes (else
// the ones it finds not terminated); hostfile requires --expect running nodes, else `count`.
int report_nodes(const std::string& verb, const std::vector<CloudNode>& nodes, int slots, int count,
                 const CommonFlags& c, const std::string& out_dir, std::string_view machine) {
  if (verb == "status") {
    int alive = int(std::count_if(nodes.begin(), nodes.end(), [](const CloudNode& n) {
      return n.state != "terminated" && n.state != "shutting-down";
    }));
    std::cout << cloud::render_status(nodes, count > 0 ? count : alive,
                                      cloud::health_reference_line(machine));
    return 0;
  }
  std::string text = cloud::render_hostfile(nodes, slots);
  int running = int(std::count(text.begin(), text.end(), '\n'));
  int expect = c.expect > 0 ? c.expect : count;
  // A node that failed its set-up or the cluster bench would slow or hang every job: named, and
  // left out.
  std::string left_out;
  for (const auto& node : cloud::left_out_of_hostfile(nodes))
    left_out += (left_out.empty() ? "" : ", ") + node;
  if (!left_out.empty()) {
    std::cerr << "dsx: left out of the hostfile: " << left_out
              << "; replace them (docs/cloud.md 1.5)\n";
  }
  if (expect > 0 && running < expect) {
    throw Error(ErrorKind::Launch,
                "only " + std::to_string(running) + " of " + std::to_string(expect) +
                    " nodes are running and healthy" +
                    (left_out.empty() ? "" : " (left out: " + left_out + ")") +
                    ": wait (see `status`), or replace the nodes left out, and run hostfile again");
  }
  if (running == 0)
    throw Error(ErrorKind::Launch,
                left_out.empty()
                    ? "no running nodes found for this cluster: check --cluster and the region/zone"
                    : "no healthy node left for the hostfile (left out: " + left_out +
                          "): replace them (docs/cloud.md 1.5)");
  for (const auto& n : nodes) {
    if (n.state == "running" && n.ready != "yes" && cloud::unhealthy_reason(n).empty()) {
      std::cerr << "dsx: warning: node " << n.id
                << " has not reported ready (dsx-ready=" << (n.ready.empty() ? "unset" : n.ready)
                << "); see /var/log/dsx-node-setup.log there\n";
    }
  }
  std::string path = c.hostfile_out.empty() ? out_dir + "/hostfile" : c.hostfile_out;
  cloud::write_file_atomically(path, text);
  std::cout << text << "wrote " << path << " (" << running << " nodes; the first is rank 0)\n";
  return 0;
}

using NodeParser = std::vector<CloudNode> (*)(std::string_view json);

// status/hostfile: lists the nodes through the cloud CLI (or a saved listing), polling every
// DSX_CLOUD_POLL_S seconds (15) for up to --wait seconds until the expected nodes report ready,
// then prints the table or writes the hostfile. With --dry-run, prints the listing call.
int list_nodes(const std::string& verb, const cloud::Step& list_step, NodeParser parse, int slots,
               int count, const CommonFlags& c, const std::string& out_dir,
               std::string_view machine) {
  cloud::Plan plan{"list the cluster", {list_step}};
  if (c.dry_run && c.from_json.empty()) {
    cloud::print_plan(std::cout, plan);
    return 0;
  }
  const int want = c.expect > 0 ? c.expect : count;
  if (c.wait_s > 0 && want == 0)
    throw Error(ErrorKind::Usage, "--wait needs --count or --expect: how many nodes to wait for");
  const char* poll_env = std::getenv("DSX_CLOUD_POLL_S");
  const int poll_s = poll_env ? std::max(0, std::atoi(poll_env)) : 15;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(c.wait_s);
  while (true) {
    std::ostringstream quiet;
    auto nodes = parse(c.from_json.empty() ? cloud::execute_plan(plan, quiet).at(list_step.capture)
                                           : read_file(c.from_json));
    int ready = int(std::count_if(nodes.begin(), nodes.end(), [](const CloudNode& n) {
      return n.state == "running" && n.ready == "yes";
    }));
    auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline -
                                                                 std::chrono::steady_clock::now());
    if (c.wait_s <= 0 || ready >= want || left.count() <= 0) {
      return report_nodes(verb, nodes, slots, count, c, out_dir, machine);
    }
    std::cerr << "dsx: " << ready << " of " << want << " nodes ready; checking again ("
              << left.count() << " s left)\n";
    std::this_thread::sleep_for(std::chrono::seconds(std::min<long>(poll_s, left.count())));
  }
}

// `undo` is the command that removes what a half-finished plan created.
void run_or_print(const cloud::Plan& plan, bool dry_run, const std::string& undo = "") {
  if (dry_run) {
    cloud::print_plan(std::cout, plan);
    return;
  }
  try {
    cloud::execute_plan(plan, std::cerr);
  } catch (const Error& e) {
    if (undo.empty() || e.kind() == ErrorKind::Config) throw;  // pre-flight: nothing was made
    throw Error(e.kind(), std::string(e.what()) + ". Fix the cause, then run `" + undo +
                              "` to remove what was created, and up again");
  }
}

// What render wrote. Before `up` these are notes (stderr): with --dry-run, standard output is
// the script alone, so `dsx cloud ... up --dry-run > up.sh` gives a script that runs.
void print_written(const std::vector<std::string>& files, const std::string& verb, bool dry_run,
                   const std::string& out_dir) {
  std::ostream& out = verb == "up" ? std::cerr : std::cout;
  if (verb == "up" && dry_run) {
    out << "dsx: --dry-run runs no cloud call, but the printed commands read files that are rendered now, "
           "into " << out_dir << " (with the cluster's new SSH key pair, cluster_key):\n";
  }
  for (const auto& f : files) out << "wrote " << f << "\n";
}

int run_aws(const std::string& verb, int argc, char** argv) {
  cloud::AwsClusterOptions o;
  CommonFlags c;
  bool no_efa_only = false;
  po::options_description d("dsx cloud aws " + verb);
  d.add_options()("cluster", po::value(&o.cluster)->required(),
                  "cluster name; names and tags every resource")(
      "region", po::value(&o.region)->required(), "AWS region, e.g. us-east-1")(
      "instance-type", po::value(&o.instance_type)->default_value(o.instance_type),
      "p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge")(
      "count", po::value(&o.count)->default_value(o.count), "number of nodes")(
      "subnet", po::value(&o.subnet), "render/up: private subnet id (one AZ)")(
      "ssh-cidr", po::value(&o.ssh_cidr), "render/up: CIDR allowed to SSH in (bastion, VPN)")(
      "key-name", po::value(&o.key_name), "EC2 key pair for the default user")(
      "image", po::value(&o.image)->default_value(o.image),
      "AMI id or resolve:ssm:<parameter> (default: DLAMI Base OSS Nvidia, Ubuntu 22.04)")(
      "root-device", po::value(&o.root_device)->default_value(o.root_device),
      "root device name of the image")(
      "root-gb", po::value(&o.root_volume_gb)->default_value(o.root_volume_gb),
      "root volume size (gp3)")("capacity-reservation", po::value(&o.capacity_reservation),
                                "cr-... to launch into (no placement group then)")(
      "capacity-block", po::bool_switch(&o.capacity_block),
      "the reservation is a Capacity Block for ML")(
      "no-efa-only", po::bool_switch(&no_efa_only),
      "use `efa` (with IP) instead of `efa-only` on secondary cards")(
      "security-group", po::value(&o.security_group), "use this sg-... instead of creating one")(
      "instance-profile", po::value(&o.instance_profile),
      "use this instance profile instead of creating one")(
      "dsx-package", po::value(&o.dsx_package),
      "s3:// or https:// URL of dsx_*.deb, or a .tar.gz of an installed dsx or of its sources")(
      "os-user", po::value(&o.os_user)->default_value(o.os_user), "login user of the image")(
      "storage", po::value(&o.storage)->default_value(o.storage),
      "shared storage made with the cluster and mounted on every node: fsx-lustre, efs or none")(
      "storage-gb", po::value(&o.storage_gb)->default_value(o.storage_gb),
      "fsx-lustre: capacity in GiB (1200, 2400, then steps of 2400)")(
      "fsx-deployment", po::value(&o.fsx_deployment)->default_value(o.fsx_deployment),
      "fsx-lustre: PERSISTENT_2 (replicated) or SCRATCH_2")(
      "fsx-throughput", po::value(&o.fsx_throughput),
      "fsx-lustre PERSISTENT_2: MB/s per TiB, 125, 250 (default), 500 or 1000")(
      "shared-dir", po::value(&o.shared_dir)->default_value(o.shared_dir),
      "where every node mounts the shared storage")(
      "keep-storage", po::bool_switch(&o.keep_storage),
      "down: leave the shared file system (and its security group)");
  add_common(d, c, o.out_dir);
  auto args = parse_args(argc, argv, std::string("dsx cloud aws ") + verb + " [options]", d);
  if (args.help) return 0;
  o.efa_only = !no_efa_only;
  if (verb == "render" || verb == "up") {
    print_written(cloud::render_aws(o), verb, c.dry_run, o.out_dir);
    if (verb == "up") {
      run_or_print(cloud::aws_up_plan(o), c.dry_run,
                   "dsx cloud aws down --cluster " + o.cluster + " --region " + o.region);
      if (c.dry_run) std::cout << cloud::node_steps_comment("aws/user-data.sh");
    }
    if (verb == "up" && !c.dry_run) {
      std::cout << "launched; nodes set themselves up for a few minutes. Next: dsx cloud aws status"
                   " --cluster "
                << o.cluster << " --region " << o.region << "\n"
                << kUnhealthyNodesNote;
    }
    return 0;
  }
  cloud::validate_cluster_name(o.cluster);
  if (verb == "down") {
    run_or_print(cloud::aws_down_plan(o), c.dry_run);
    return 0;
  }
  return list_nodes(verb, cloud::aws_describe_step(o), cloud::parse_aws_describe_instances,
                    cloud::aws_instance_type(o.instance_type).gpus,
                    args.vars["count"].defaulted() ? 0 : o.count, c, o.out_dir, o.instance_type);
}

int run_gcp(const std::string& verb, int argc, char** argv) {
  cloud::GcpClusterOptions o;
  CommonFlags c;
  po::options_description d("dsx cloud gcp " + verb);
  d.add_options()("cluster", po::value(&o.cluster)->required(),
                  "cluster name; names and labels every resource")(
      "project", po::value(&o.project)->required(), "GCP project id")(
      "zone", po::value(&o.zone)->required(), "zone, e.g. us-central1-a (all VMs in one zone)")(
      "machine-type", po::value(&o.machine_type)->default_value(o.machine_type),
      "a2-highgpu-8g, a2-megagpu-16g, a2-ultragpu-8g, a3-highgpu-8g, a3-megagpu-8g, "
      "a3-ultragpu-8g (needs --reservation or --spot)")(
      "count", po::value(&o.count)->default_value(o.count), "number of VMs")(
      "network", po::value(&o.network)->default_value(o.network), "primary VPC")(
      "subnet", po::value(&o.subnet)->default_value(o.subnet), "primary subnet")(
      "ssh-cidr", po::value(&o.ssh_cidr),
      "render/up: CIDR allowed to SSH in (35.235.240.0/20 for IAP)")(
      "image-project", po::value(&o.image_project)->default_value(o.image_project),
      "project of the image family")("image-family",
                                     po::value(&o.image_family)->default_value(o.image_family),
                                     "Deep Learning VM image family")(
      "image", po::value(&o.image), "a given image instead of the family")(
      "boot-disk-gb", po::value(&o.boot_disk_gb)->default_value(o.boot_disk_gb), "boot disk size")(
      "boot-disk-type", po::value(&o.boot_disk_type),
      "boot disk type (default: what the machine series takes)")(
      "service-account", po::value(&o.service_account),
      "VM service account (default: the project's compute default)")(
      "reservation", po::value(&o.reservation),
      "render/up: take the VMs from this reservation (name or projects/P/reservations/NAME)")(
      "spot", po::bool_switch(&o.spot), "render/up: spot VMs (deleted when GCP reclaims them)")(
      "gpudirect-plugin-image", po::value(&o.gpudirect_plugin_image),
      "A3: TCPX/TCPXO/gIB NCCL plugin installer image")(
      "rxdm-image", po::value(&o.rxdm_image), "A3 High/Mega: receive-datapath manager image")(
      "dsx-package", po::value(&o.dsx_package),
      "gs:// or https:// URL of dsx_*.deb, or a .tar.gz of an installed dsx or of its sources")(
      "os-user", po::value(&o.os_user)->default_value(o.os_user),
      "user that gets the cluster SSH key")(
      "storage", po::value(&o.storage)->default_value(o.storage),
      "shared storage made with the cluster and mounted on every VM: filestore or none")(
      "filestore-tier", po::value(&o.filestore_tier)->default_value(o.filestore_tier),
      "filestore: BASIC_HDD, BASIC_SSD or ZONAL")(
      "storage-gb", po::value(&o.storage_gb)->default_value(o.storage_gb),
      "filestore: capacity in GiB (BASIC_SSD 2560 at least, the others 1024)")(
      "shared-dir", po::value(&o.shared_dir)->default_value(o.shared_dir),
      "where every VM mounts the shared storage")(
      "keep-storage", po::bool_switch(&o.keep_storage), "down: leave the Filestore instance");
  add_common(d, c, o.out_dir);
  auto args = parse_args(argc, argv, std::string("dsx cloud gcp ") + verb + " [options]", d);
  if (args.help) return 0;
  if (verb == "render" || verb == "up") {
    print_written(cloud::render_gcp(o), verb, c.dry_run, o.out_dir);
    if (verb == "up") {
      run_or_print(cloud::gcp_up_plan(o), c.dry_run,
                   "dsx cloud gcp down --cluster " + o.cluster + " --project " + o.project +
                       " --zone " + o.zone + " --machine-type " + o.machine_type);
      if (c.dry_run) std::cout << cloud::node_steps_comment("gcp/startup.sh");
    }
    if (verb == "up" && !c.dry_run) {
      std::cout << "created; VMs set themselves up for a few minutes. Next: dsx cloud gcp status"
                   " --cluster "
                << o.cluster << " --project " << o.project << " --zone " << o.zone << "\n"
                << kUnhealthyNodesNote;
    }
    return 0;
  }
  cloud::validate_cluster_name(o.cluster);
  if (verb == "down") {
    run_or_print(cloud::gcp_down_plan(o), c.dry_run);
    return 0;
  }
  return list_nodes(verb, cloud::gcp_list_step(o), cloud::parse_gcp_instances_list,
                    cloud::gcp_machine_type(o.machine_type).gpus,
                    args.vars["count"].defaulted() ? 0 : o.count, c, o.out_dir, o.machine_type);
}

}  // namespace

int run_cloud(int argc, char** argv) {
  const std::string usage = std::string("usage: dsx cloud aws|gcp ") + kVerbs +
                            " [options]   (--help after the verb lists them)";
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << usage << "\n\n"
              << "  render    write the templates, node script, CLI scripts and Slurm job\n"
              << "  up        render, then create the cluster with the aws / gcloud CLI\n"
              << "  status    list the nodes and whether each finished its set-up\n"
              << "  hostfile  write 'IP slots=8' lines for dsx launch --hostfile\n"
              << "  down      delete the nodes and everything up created\n"
              << "  --dry-run prints each CLI command instead of running it\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string provider = argv[1];
  if (provider != "aws" && provider != "gcp") {
    throw Error(ErrorKind::Usage, "unknown cloud '" + provider + "': " + usage);
  }
  const std::set<std::string> verbs = {"render", "up", "status", "hostfile", "down"};
  if (argc < 3 || !verbs.count(argv[2])) {
    throw Error(ErrorKind::Usage, "dsx cloud " + provider + " needs a verb: " + kVerbs);
  }
  const std::string verb = argv[2];
  std::string prog = "dsx cloud " + provider + " " + verb;
  argv[2] = prog.data();
  return provider == "aws" ? run_aws(verb, argc - 2, argv + 2) : run_gcp(verb, argc - 2, argv + 2);
}

}  // namespace dsx::tools
