// The node scripts run for real, as root would run them at first boot, but against a scratch
// root (DSX_ROOT) and with the cloud and hardware commands (fi_info, nvidia-smi, curl to the
// metadata service, aws, gcloud, mdadm, mount, docker, ...) replaced by recorder.sh on PATH.
// Each test checks the environment file, the hostfile, the SSH set-up and the recorded calls.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "cloud/aws_render.h"
#include "cloud/gcp_render.h"
#include "tests/cloud/ci_cluster.h"
#include "tests/cloud/temp_dir.h"
#include "tests/expect_contains.h"
#include "tests/tools/run_command.h"

using namespace dsx::cloud;
using dsx::test::read_text;
using dsx::test::TempDir;
using dsx::test::write_text;

namespace {

constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKeyTestKeyTestKey dsx-ci";
constexpr const char* kRecorded = DSX_SOURCE_DIR "/tests/cloud/recorder.sh";
constexpr const char* kFakeDsx =
    "#!/bin/sh\n"
    "case $1 in\n"
    "  version) echo \"dsx 0.1.0\" ;;\n"
    "  report) echo \"dsx $* with NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME\" >>\"$DSX_TEST_LOG\"\n"
    "    if [ -n \"$DSX_TEST_REPORT_ERROR\" ]; then echo \"dsx report: $DSX_TEST_REPORT_ERROR\"; exit 1; fi\n"
    "    echo \"dsx report: no errors\" ;;\n"
    // The cluster bench: a bench table whose largest size has DSX_TEST_BUSBW, 20.000 for a pair
    // with DSX_TEST_SLOW_HOST in it.
    "  launch) echo \"dsx launch $*\" >>\"$DSX_TEST_LOG\"\n"
    "    [ -n \"$DSX_TEST_BENCH_FAIL\" ] && { echo \"rank 9: allreduce failed\"; exit 1; }\n"
    "    bw=${DSX_TEST_BUSBW:-78.500}\n"
    "    if [ -n \"$DSX_TEST_SLOW_HOST\" ]; then\n"
    "      case \"$*\" in *--include*\"$DSX_TEST_SLOW_HOST\"*) bw=20.000 ;; esac\n"
    "    fi\n"
    "    echo \"# dsx bench comm: allreduce, fp32, sum, 24 ranks, backend nccl\"\n"
    "    echo \"#      size(B)        count   type  redop     time(us)  algbw(GB/s)  busbw(GB/s)   #wrong\"\n"
    "    echo \"     268435456     67108864   fp32    sum      5000.00       40.000       30.000        0\"\n"
    "    echo \"    2147483648    536870912   fp32    sum     30000.00       41.800       $bw        0\"\n"
    "    echo \"# Avg bus bandwidth    : 50.000 GB/s\" ;;\n"
    "esac\n";

class CloudNodeScript : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"fi_info", "nvidia-smi", "curl", "aws", "gcloud", "ip", "systemctl", "mdadm", "mkfs.ext4",
          "mount", "useradd", "chown", "docker", "apt-get", "mount.lustre", "mount.nfs",
          "mount.nfs4", "runuser"}) {
      std::filesystem::create_symlink(kRecorded, bin_ / name);
    }
    // A dsx "install tree" whose binary answers `version` and `report --check` (recording the
    // environment it ran in), packed as the real tarball and the real .deb would be.
    write_text(pkg_ / "tree/bin/dsx", kFakeDsx, true);
    auto tar =
        dsx::test::run_command("tar -czf " + pkg_ / "dsx.tar.gz" + " -C " + pkg_ / "tree" + " .");
    ASSERT_EQ(tar.exit_code, 0) << tar.output;
    write_text(pkg_ / "deb/usr/bin/dsx", kFakeDsx, true);
    write_text(pkg_ / "deb/DEBIAN/control",
               "Package: dsx\nVersion: 0.1.0\nArchitecture: all\nMaintainer: ci <ci@dsx.invalid>\n"
               "Description: test package\n");
    auto deb = dsx::test::run_command("dpkg-deb --build --root-owner-group " + pkg_ / "deb" + " " +
                                      pkg_ / "dsx_0.1.0_amd64.deb");
    ASSERT_EQ(deb.exit_code, 0) << deb.output;
    std::filesystem::create_directories(root_ / "home");
  }

  // Runs `script` (bash) with the recorders first on PATH; returns its exit code and output.
  dsx::test::CommandResult run(const std::string& script, const std::string& peers, int efa = 0,
                               int peer_timeout_s = 5) {
    write_text(pkg_ / "node.sh", script, true);
    std::string command =
        "env -i PATH=" + bin_.path() + ":/usr/bin:/bin DSX_ROOT=" + root_.path() +
        " DSX_POLL_S=0 DSX_PEER_TIMEOUT_S=" + std::to_string(peer_timeout_s) +
        " DSX_TEST_LOG=" + (pkg_ / "calls.log") + " DSX_TEST_PACKAGE=" + (pkg_ / package_) +
        " DSX_TEST_REPORT_ERROR='" + report_error_ + "'" +
        " DSX_TEST_EFA=" + std::to_string(efa) + " DSX_TEST_PEERS='" + peers + "'" +
        " DSX_TEST_SHARED_SOURCE='" + shared_source_ + "' DSX_TEST_MOUNT_FAIL=" + mount_fail_ +
        " DSX_STORAGE_TIMEOUT_S=1 DSX_HEALTH_TIMEOUT_S=2 DSX_TEST_STATES='" + states_ +
        "' DSX_TEST_SLOW_HOST=" + slow_host_ + " DSX_TEST_BENCH_FAIL=" + bench_fail_ +
        " DSX_TEST_NICS=" + std::to_string(nics_) + " timeout 60 bash " + (pkg_ / "node.sh");
    return dsx::test::run_command(command);
  }

  std::string calls() { return read_text(pkg_ / "calls.log"); }
  bool called(const std::string& line) { return calls().find(line) != std::string::npos; }

  AwsClusterOptions aws_options() {
    AwsClusterOptions o = dsx::test::ci_aws_cluster("us-west-2");
    o.instance_type = "p4d.24xlarge";
    o.count = 3;
    o.dsx_package = "s3://dsx-artifacts/dsx.tar.gz";
    return o;
  }

  GcpClusterOptions gcp_options(const std::string& machine) {
    GcpClusterOptions o = dsx::test::ci_gcp_cluster();
    o.machine_type = machine;
    o.count = 2;
    return o;
  }

  void add_nvme(const std::string& prefix, int count) {
    for (int i = 0; i < count; ++i)
      write_text(root_ / ("dev/disk/by-id/" + prefix + std::to_string(i)), "");
  }

  TempDir root_, bin_, pkg_;
  std::string package_ = "dsx.tar.gz";  // what the fake storage serves for --dsx-package
  std::string report_error_;            // the error the fake `dsx report --check` finds
  int nics_ = 9;  // network interfaces the fake `ip` lists (NIC 0 and 8 GPU NICs)
  std::string shared_source_;  // the node's dsx-shared-source tag / metadata value
  std::string mount_fail_;     // non-empty: mounting the shared file system fails
  std::string states_;         // the peers' states the cluster bench sees ("" = all checked)
  std::string slow_host_;      // pairs with this node bench at 20 GB/s
  std::string bench_fail_;     // non-empty: dsx launch of the bench fails
};

}  // namespace

TEST_F(CloudNodeScript, AwsUserDataSetsUpAP4dNode) {
  add_nvme("nvme-Amazon_EC2_NVMe_Instance_Storage_AWS", 8);
  // The same drive under a second name (a namespace link) must not become a ninth RAID member.
  std::filesystem::create_symlink(
      root_ / "dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS0",
      root_ / "dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS0_1");
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-ofi-tuner.so", "");

  // describe-instances --output text lists the peers tab-separated, in no particular order.
  auto r =
      run(aws_user_data(aws_options(), kPublicKey), "10.0.1.12\\t10.0.1.7\\n10.0.1.9", /*efa=*/4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();

  EXPECT_EQ(read_text(root_ / "etc/dsx/env"),
            "FI_PROVIDER=efa\n"
            "FI_EFA_USE_DEVICE_RDMA=1\n"
            "FI_EFA_USE_HUGE_PAGE=0\n"
            "NCCL_SOCKET_IFNAME=^docker,lo,veth\n"
            "NCCL_NET_PLUGIN=ofi\n"
            "LD_LIBRARY_PATH=/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:/usr/local/cuda/lib64\n"
            "NCCL_TUNER_PLUGIN=/opt/amazon/ofi-nccl/lib/libnccl-ofi-tuner.so\n");
  // Numeric order, not text order: .7 < .9 < .12 on every node, so rank 0 agrees everywhere.
  const std::string hostfile = "10.0.1.7 slots=8\n10.0.1.9 slots=8\n10.0.1.12 slots=8\n";
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile"), hostfile);
  EXPECT_EQ(read_text(root_ / "home/ubuntu/hostfile"), hostfile);
  EXPECT_EQ(read_text(root_ / "home/ubuntu/.deepspeed_env"), read_text(root_ / "etc/dsx/env"));

  // Login shells see the same values, quoted so that the shell keeps them intact.
  auto shell = dsx::test::run_command("bash -c '. " + root_ / "etc/profile.d/dsx.sh" +
                                      " && printf %s \"$NCCL_SOCKET_IFNAME|$FI_PROVIDER\"'");
  EXPECT_EQ(shell.output, "^docker,lo,veth|efa");

  EXPECT_NE(read_text(root_ / "home/ubuntu/.ssh/authorized_keys").find(kPublicKey),
            std::string::npos);
  EXPECT_NE(read_text(root_ / "home/ubuntu/.ssh/dsx_cluster_key").find("cluster-private-key"),
            std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat((root_ / "home/ubuntu/.ssh/dsx_cluster_key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(read_text(root_ / "home/ubuntu/.ssh/config").find("StrictHostKeyChecking accept-new"),
            std::string::npos);
  EXPECT_NE(read_text(root_ / "etc/security/limits.d/90-dsx.conf").find("* hard memlock unlimited"),
            std::string::npos);

  EXPECT_TRUE(called("mdadm --create /dev/md0 --level=0 --raid-devices=8 --force --run " +
                     root_ / "dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS0"))
      << calls();
  EXPECT_TRUE(called("mkfs.ext4 -F -q -L dsx-scratch /dev/md0\n"));
  EXPECT_TRUE(called("mount -o noatime\\,nofail /dev/md0 " + root_ / "scratch\n")) << calls();
  EXPECT_TRUE(called("systemctl enable --now nvidia-fabricmanager\n"));
  EXPECT_TRUE(called(
      "aws --region us-west-2 --cli-connect-timeout 10 --cli-read-timeout 60 ssm get-parameter "
      "--name /dsx/ci/cluster-key --with-decryption"));
  EXPECT_TRUE(called("aws s3 cp --only-show-errors s3://dsx-artifacts/dsx.tar.gz"));
  EXPECT_TRUE(
      called("apt-get install -y -qq --no-install-recommends libboost-program-options1.74.0"));
  EXPECT_TRUE(std::filesystem::exists(root_ / "opt/dsx/bin/dsx"));
  EXPECT_EQ(std::filesystem::read_symlink(root_ / "usr/local/bin/dsx"), "/opt/dsx/bin/dsx");
  // Readiness: dsx report checks the node in the environment the ranks get.
  EXPECT_TRUE(called("dsx report --check --nodes 3 with NCCL_SOCKET_IFNAME=^docker,lo,veth\n"))
      << calls();
  // The readiness tag is the last AWS call.
  std::string log = calls();
  size_t last = log.rfind("\naws ") + 1;
  EXPECT_EQ(log.substr(last, log.find('\n', last) + 1 - last),
            "aws --region us-west-2 --cli-connect-timeout 10 --cli-read-timeout 60 "
            "ec2 create-tags --resources i-0abc1234 --tags Key=dsx-ready\\,Value=yes\n");
}

TEST_F(CloudNodeScript, AwsNodeWithoutEfaReportsTheFailedStep) {
  auto r = run(aws_user_data(aws_options(), kPublicKey), "10.0.1.7", /*efa=*/0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "FAILED in step efa: fi_info -p efa finds no EFA device");
  EXPECT_TRUE(
      called("create-tags --resources i-0abc1234 --tags Key=dsx-ready\\,Value=failed-efa\n"))
      << calls();
  EXPECT_FALSE(std::filesystem::exists(root_ / "etc/dsx/hostfile"));
}

TEST_F(CloudNodeScript, AwsNodeInstallsTheDebPackageWithApt) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  package_ = "dsx_0.1.0_amd64.deb";
  auto o = aws_options();
  o.dsx_package = "s3://dsx-artifacts/dsx_0.1.0_amd64.deb";
  auto r = run(aws_user_data(o, kPublicKey), "10.0.1.12\\t10.0.1.7\\n10.0.1.9", /*efa=*/4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_TRUE(called("aws s3 cp --only-show-errors s3://dsx-artifacts/dsx_0.1.0_amd64.deb")) << calls();
  EXPECT_TRUE(called("apt-get install -y -qq --no-install-recommends /")) << calls();
  EXPECT_TRUE(std::filesystem::exists(root_ / "usr/bin/dsx"));  // unpacked by the fake apt-get
  EXPECT_FALSE(std::filesystem::exists(root_ / "opt/dsx"));
  EXPECT_TRUE(called("dsx report --check --nodes 3")) << calls();
}

TEST_F(CloudNodeScript, NodeWhoseDsxReportFindsAnErrorIsNotReady) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  report_error_ = "driver-too-old: CUDA runtime 13.0 needs a driver for CUDA 13 (>= 580)";
  auto r = run(aws_user_data(aws_options(), kPublicKey), "10.0.1.12\\t10.0.1.7\\n10.0.1.9", /*efa=*/4);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output,
                  "FAILED in step report: dsx report found errors on this node: dsx report: "
                  "driver-too-old: CUDA runtime 13.0 needs a driver for CUDA 13 (>= 580)");
  EXPECT_TRUE(called("Key=dsx-ready\\,Value=failed-report\n")) << calls();
  EXPECT_FALSE(called("Key=dsx-ready\\,Value=yes")) << calls();
}

TEST_F(CloudNodeScript, TarballThatIsNeitherATreeNorSourcesIsRefused) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  write_text(pkg_ / "other/notes.txt", "not dsx\n");
  ASSERT_EQ(dsx::test::run_command("tar -czf " + pkg_ / "other.tar.gz" + " -C " + pkg_ / "other" + " .")
                .exit_code,
            0);
  package_ = "other.tar.gz";
  auto o = aws_options();
  o.dsx_package = "s3://dsx-artifacts/other.tar.gz";
  auto r = run(aws_user_data(o, kPublicKey), "10.0.1.7", /*efa=*/4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output,
                  "FAILED in step dsx: s3://dsx-artifacts/other.tar.gz holds neither an installed "
                  "dsx (bin/dsx) nor dsx's sources (CMakeLists.txt)");
}

TEST_F(CloudNodeScript, AwsNodeGivesUpWhenPeersNeverArrive) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  auto r = run(aws_user_data(aws_options(), kPublicKey), "10.0.1.7\\t10.0.1.9", /*efa=*/4,
               /*peer_timeout_s=*/1);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "only 2 of 3 nodes are running after 1s");
  EXPECT_TRUE(called("Key=dsx-ready\\,Value=failed-peers\n")) << calls();
  EXPECT_FALSE(std::filesystem::exists(root_ / "etc/dsx/hostfile"));
}

TEST_F(CloudNodeScript, GcpA3HighStartsTcpxAndNamesItsNics) {
  add_nvme("google-local-nvme-ssd-", 16);
  auto o = gcp_options("a3-highgpu-8g");
  auto r = run(gcp_startup_script(o, kPublicKey), "10.128.0.7\\n10.128.0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  std::string env = read_text(root_ / "etc/dsx/env");
  // NIC 0 (MAC ...:00) is ens4; the four GPU NICs are ens5..ens8 on this image.
  for (const char* line :
       {"NCCL_SOCKET_IFNAME=ens4\n", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=ens5,ens6,ens7,ens8\n",
        "NCCL_GPUDIRECTTCPX_CTRL_DEV=ens4\n", "NCCL_ALGO=Ring\n", "NCCL_PROTO=Simple\n",
        "NCCL_CROSS_NIC=0\n", "NCCL_NSOCKS_PERTHREAD=4\n", "NCCL_SOCKET_NTHREADS=1\n",
        "NCCL_NET_GDR_LEVEL=PIX\n", "NCCL_P2P_PXN_LEVEL=0\n", "NCCL_BUFFSIZE=4194304\n",
        "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=/run/tcpx\n",
        "NCCL_GPUDIRECTTCPX_TX_BINDINGS=ens5:8-21,112-125;ens6:8-21,112-125;ens7:60-73,164-177;"
        "ens8:60-73,164-177\n",
        "NCCL_GPUDIRECTTCPX_RX_BINDINGS=ens5:22-35,126-139;ens6:22-35,126-139;ens7:74-87,178-191;"
        "ens8:74-87,178-191\n",
        "LD_LIBRARY_PATH=/var/lib/tcpx/lib64:/usr/local/nvidia/lib64\n"}) {
    EXPECT_NE(env.find(line), std::string::npos) << line << "\n" << env;
  }
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile"), "10.128.0.5 slots=8\n10.128.0.7 slots=8\n");
  EXPECT_TRUE(called("--raid-devices=16")) << calls();
  EXPECT_TRUE(called("docker run --rm -v /var/lib:/var/lib " + gcp_plugin_image(o) +
                     " install --install-nccl\n"));
  EXPECT_TRUE(
      called(gcp_rxdm_image(o) + " --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx"))
      << calls();
  EXPECT_TRUE(
      called("gcloud secrets versions access latest --quiet --project=proj-1 "
             "--secret=dsx-ci-cluster-key\n"));
  EXPECT_TRUE(
      called("gcloud compute instances add-labels dsx-ci-0001 --quiet --project=proj-1 "
             "--zone=us-central1-a --labels=dsx-ready=yes\n"))
      << calls();
  EXPECT_NE(read_text(root_ / "home/dsx/.ssh/authorized_keys").find(kPublicKey), std::string::npos);
}

TEST_F(CloudNodeScript, GcpA3MegaTakesThePluginProfileAndEightNics) {
  write_text(root_ / "var/lib/tcpxo/lib64/nccl-env-profile.sh",
             "#!/bin/bash\nexport NCCL_FASTRAK_NUM_FLOWS=2\nexport "
             "NCCL_BUFFSIZE=\"8388608\"\nNOT_EXPORTED=1\n");
  auto r =
      run(gcp_startup_script(gcp_options("a3-megagpu-8g"), kPublicKey), "10.128.0.5\\n10.128.0.7");
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  std::string env = read_text(root_ / "etc/dsx/env");
  for (const char* line :
       {"NCCL_FASTRAK_NUM_FLOWS=2\n", "NCCL_BUFFSIZE=8388608\n", "NCCL_FASTRAK_CTRL_DEV=ens4\n",
        "NCCL_FASTRAK_IFNAME=ens5,ens6,ens7,ens8,ens9,ens10,ens11,ens12\n",
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices\n",
        "LD_LIBRARY_PATH=/var/lib/tcpxo/lib64:/usr/local/nvidia/lib64\n"}) {
    EXPECT_NE(env.find(line), std::string::npos) << line << "\n" << env;
  }
  EXPECT_EQ(env.find("NOT_EXPORTED"), std::string::npos);
}

TEST_F(CloudNodeScript, GcpA2UsesSocketsOnThePrimaryNic) {
  auto r =
      run(gcp_startup_script(gcp_options("a2-ultragpu-8g"), kPublicKey), "10.128.0.5\\n10.128.0.7");
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_EQ(read_text(root_ / "etc/dsx/env"), "NCCL_SOCKET_IFNAME=ens4\n");
  EXPECT_FALSE(called("docker"));
  EXPECT_NE(r.output.find("no local NVMe drives"), std::string::npos);
}

TEST_F(CloudNodeScript, GcpA3UltraInstallsGibAndTakesItsSettings) {
  // What the gIB installer leaves behind; a value built from another variable cannot be copied.
  write_text(root_ / "usr/local/gib/scripts/set_nccl_env.sh",
             "#!/bin/bash\n"
             "export NCCL_NET=gIB\n"
             "export NCCL_IB_TC=\"52\"\n"
             "export NCCL_TUNER_CONFIG_PATH=/usr/local/gib/configs/tuner_config_a3u.txtpb\n"
             "export NCCL_SOCKET_IFNAME=eth0\n"
             "export LD_LIBRARY_PATH=/usr/local/gib/lib64:$LD_LIBRARY_PATH\n"
             "NOT_EXPORTED=1\n");
  auto r =
      run(gcp_startup_script(gcp_options("a3-ultragpu-8g"), kPublicKey), "10.128.0.5\\n10.128.0.7");
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  std::string env = read_text(root_ / "etc/dsx/env");
  for (const char* line : {"NCCL_NET=gIB\n", "NCCL_IB_TC=52\n",
                           "NCCL_TUNER_CONFIG_PATH=/usr/local/gib/configs/tuner_config_a3u.txtpb\n",
                           "LD_LIBRARY_PATH=/usr/local/gib/lib64:/usr/local/nvidia/lib64\n",
                           "NCCL_SOCKET_IFNAME=ens4\n"}) {
    EXPECT_NE(env.find(line), std::string::npos) << line << "\n" << env;
  }
  EXPECT_EQ(env.find("NOT_EXPORTED"), std::string::npos) << env;
  EXPECT_EQ(env.find("NCCL_SOCKET_IFNAME=eth0"), std::string::npos) << "the host gVNIC wins";
  EXPECT_EQ(env.find("$LD_LIBRARY_PATH"), std::string::npos) << env;
  EXPECT_TRUE(
      called("docker run --rm --volume /usr/local/gib:/var/lib/gib "
             "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.2 install "
             "--install-nccl\n"))
      << calls();
  EXPECT_FALSE(called("receive-datapath-manager")) << "gIB needs no RXDM";
  EXPECT_CONTAINS(r.output, "GPU NICs ens5,ens6,ens7,ens8,ens9,ens10,ens11,ens12");
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile"), "10.128.0.5 slots=8\n10.128.0.7 slots=8\n");
  EXPECT_TRUE(called("--labels=dsx-ready=yes\n")) << calls();
}

TEST_F(CloudNodeScript, GcpA3UltraFailsWhenTheGibInstallLeftNoSettings) {
  auto o = gcp_options("a3-ultragpu-8g");
  o.gpudirect_plugin_image = "registry.example/gib:test";
  auto r = run(gcp_startup_script(o, kPublicKey), "10.128.0.5\\n10.128.0.7");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(
      r.output,
      "FAILED in step gpudirect: " + root_ / "usr/local/gib/scripts/set_nccl_env.sh" +
          " is missing: the gIB plugin install (registry.example/gib:test) did not complete");
  EXPECT_TRUE(
      called("docker run --rm --volume /usr/local/gib:/var/lib/gib registry.example/gib:test"))
      << calls();
  EXPECT_TRUE(called("--labels=dsx-ready=failed-gpudirect\n")) << calls();
  EXPECT_FALSE(std::filesystem::exists(root_ / "etc/dsx/hostfile"));
}

TEST_F(CloudNodeScript, GcpA3UltraWithoutItsMrdmaNicsSaysWhatTheTemplateNeeds) {
  nics_ = 5;  // NIC 0 and four more: MRDMA NIC 5 never shows up
  auto r = run(gcp_startup_script(gcp_options("a3-ultragpu-8g"), kPublicKey), "10.128.0.5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output,
                  "FAILED in step network: GPU NIC 5 is missing: the template needs 8 MRDMA "
                  "NICs in the cluster's RoCE VPC");
  EXPECT_TRUE(called("--labels=dsx-ready=failed-network\n")) << calls();
}

// --storage fsx-lustre: the node mounts the address up tagged it with, keeps it in fstab, and
// points checkpoints and logs there for every rank and login shell.
TEST_F(CloudNodeScript, AwsNodeMountsFsxLustreForCheckpoints) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  shared_source_ = "fs-0abc.fsx.us-west-2.amazonaws.com@tcp:/abcdefgh";
  auto o = aws_options();
  o.storage = "fsx-lustre";
  auto r = run(aws_user_data(o, kPublicKey), "10.0.1.12\\t10.0.1.7\\n10.0.1.9", /*efa=*/4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_TRUE(called("curl -fsS --max-time 10 --retry 5 -H X-aws-ec2-metadata-token:\\ TOKEN123 "
                     "http://169.254.169.254/latest/meta-data/tags/instance/dsx-shared-source\n"))
      << calls();
  EXPECT_TRUE(called("mount -t lustre -o relatime\\,flock\\,_netdev "
                     "fs-0abc.fsx.us-west-2.amazonaws.com@tcp:/abcdefgh " + root_ / "shared\n"))
      << calls();
  EXPECT_EQ(read_text(root_ / "etc/fstab"),
            "fs-0abc.fsx.us-west-2.amazonaws.com@tcp:/abcdefgh /shared lustre "
            "relatime,flock,_netdev 0 0\n");
  EXPECT_TRUE(std::filesystem::is_directory(root_ / "shared/checkpoints"));
  EXPECT_TRUE(called("chown ubuntu: " + root_ / "shared/checkpoints " + root_ / "shared/logs"))
      << calls();
  std::string env = read_text(root_ / "etc/dsx/env");
  for (const char* line : {"DSX_SHARED_DIR=/shared\n", "DSX_CHECKPOINT_DIR=/shared/checkpoints\n",
                           "DSX_LOG_DIR=/shared/logs\n"}) {
    EXPECT_NE(env.find(line), std::string::npos) << line << env;
  }
  EXPECT_NE(read_text(root_ / "etc/profile.d/dsx.sh").find("export DSX_CHECKPOINT_DIR="),
            std::string::npos);
  EXPECT_EQ(read_text(root_ / "home/ubuntu/.deepspeed_env"), env);
  EXPECT_FALSE(called("apt-get update")) << "mount.lustre is there: no client install";
}

TEST_F(CloudNodeScript, SharedStorageThatNeverMountsFailsTheNodeWithWhatToCheck) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  shared_source_ = "10.0.1.200";
  mount_fail_ = "1";
  auto o = aws_options();
  o.storage = "efs";
  auto r = run(aws_user_data(o, kPublicKey), "10.0.1.7", /*efa=*/4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output,
                  "FAILED in step storage: efs 10.0.1.200:/ did not mount on /shared "
                  "within 1s: check that it is available and that the nodes' security "
                  "group/firewall lets them reach it");
  EXPECT_TRUE(called("mount -t nfs4 -o nfsvers=4.1\\,rsize=1048576\\,wsize=1048576\\,hard\\,"
                     "timeo=600\\,retrans=2\\,noresvport\\,_netdev 10.0.1.200:/ "))
      << calls();
  EXPECT_TRUE(called("Key=dsx-ready\\,Value=failed-storage\n")) << calls();
  EXPECT_FALSE(std::filesystem::exists(root_ / "etc/dsx/hostfile"));
}

TEST_F(CloudNodeScript, AwsNodeLaunchedWithoutTheSourceTagSaysSo) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  auto o = aws_options();
  o.storage = "fsx-lustre";
  auto r = run(aws_user_data(o, kPublicKey), "10.0.1.7", /*efa=*/4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "FAILED in step storage: this node has no dsx-shared-source");
}

TEST_F(CloudNodeScript, GcpVmMountsFilestoreOverNfs) {
  shared_source_ = "10.20.0.2:/shared";
  auto o = gcp_options("a2-highgpu-8g");
  o.storage = "filestore";
  o.shared_dir = "/mnt/team";
  auto r = run(gcp_startup_script(o, kPublicKey), "10.128.0.5\\n10.128.0.7");
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_TRUE(called("instance/attributes/dsx-shared-source\n")) << calls();
  EXPECT_TRUE(called("mount -t nfs -o hard\\,timeo=600\\,retrans=3\\,_netdev 10.20.0.2:/shared " +
                     root_ / "mnt/team\n"))
      << calls();
  EXPECT_NE(read_text(root_ / "etc/dsx/env").find("DSX_CHECKPOINT_DIR=/mnt/team/checkpoints\n"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::is_directory(root_ / "mnt/team/logs"));
}

// The cluster bench: this node (10.0.1.7) has the lowest address, so once every node reports
// checked it benches all three nodes and the three neighbour pairs, tags every node with its
// figures and verdict, and only then writes the hostfile and reports ready.
TEST_F(CloudNodeScript, LowestNodeBenchesAllNodesAndPairsBeforeTheHostfile) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  auto r = run(aws_user_data(aws_options(), kPublicKey), "10.0.1.12\\t10.0.1.7\\n10.0.1.9", 4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  const std::string hosts = root_ / "etc/dsx/hostfile.candidate";
  const std::string dsx = root_ / "opt/dsx/bin/dsx";
  EXPECT_TRUE(called("dsx launch --hostfile " + hosts + " --no_python --no_local_rank " + dsx +
                     " bench comm --backend nccl --op allreduce -b 256M -e 2G -f 2\n"))
      << calls();
  for (const char* pair : {"10.0.1.7@10.0.1.9", "10.0.1.9@10.0.1.12", "10.0.1.12@10.0.1.7"}) {
    EXPECT_TRUE(called("dsx launch --hostfile " + hosts + " --include " + pair + " ")) << pair;
  }
  EXPECT_TRUE(called("runuser -u ubuntu -- env HOME=/home/ubuntu FI_PROVIDER=efa")) << calls();
  for (const char* ip : {"10.0.1.7", "10.0.1.9", "10.0.1.12"}) {
    EXPECT_TRUE(called(std::string("ec2 create-tags --resources id-") + ip +
                       " --tags Key=dsx-busbw\\,Value=78.5 Key=dsx-busbw-all\\,Value=78.5 "
                       "Key=dsx-health\\,Value=ok\n"))
        << ip << calls();
  }
  const std::string log = calls();
  EXPECT_LT(log.find("Key=dsx-ready\\,Value=checked"), log.find("dsx launch"));
  EXPECT_LT(log.find("Key=dsx-health"), log.find("Key=dsx-ready\\,Value=yes"));
  EXPECT_EQ(read_text(root_ / "var/lib/dsx/bench/summary"),
            "10.0.1.7 78.5 ok\n10.0.1.9 78.5 ok\n10.0.1.12 78.5 ok\n");
  EXPECT_NE(read_text(root_ / "var/lib/dsx/bench/pair-1.txt").find("busbw(GB/s)"),
            std::string::npos);
}

// Both pairs of 10.0.1.12 are slow, so its better pair is far under the median: it is tagged
// slow, the others ok, and this node goes on with a hostfile that leaves 10.0.1.12 out.
TEST_F(CloudNodeScript, ThePairsFindTheSlowNode) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  slow_host_ = "10.0.1.12";
  auto r = run(aws_user_data(aws_options(), kPublicKey), "10.0.1.12\\t10.0.1.7\\n10.0.1.9", 4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_TRUE(called("--resources id-10.0.1.12 --tags Key=dsx-busbw\\,Value=20.0 "
                     "Key=dsx-busbw-all\\,Value=78.5 Key=dsx-health\\,Value=slow\n"))
      << calls();
  EXPECT_TRUE(called("--resources id-10.0.1.9 --tags Key=dsx-busbw\\,Value=78.5 "
                     "Key=dsx-busbw-all\\,Value=78.5 Key=dsx-health\\,Value=ok\n"))
      << calls();
  EXPECT_TRUE(called("Key=dsx-ready\\,Value=yes")) << calls();
  // No rank of any job goes to the slow node, and the log says which node was left out.
  const std::string hostfile = "10.0.1.7 slots=8\n10.0.1.9 slots=8\n";
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile"), hostfile);
  EXPECT_EQ(read_text(root_ / "home/ubuntu/hostfile"), hostfile);
  EXPECT_CONTAINS(r.output,
                  "left out of the hostfile, as the cluster bench did not find them ok: "
                  "10.0.1.12 (slow)");
}

// A node that is not the bench node learns the others' verdicts from their tags: the slow one
// (10.0.1.9) is left out of its hostfile too, and so is one no longer running (10.0.1.11).
TEST_F(CloudNodeScript, EveryHealthyNodesHostfileLeavesTheSlowNodeOut) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  states_ =
      "10.0.1.3\\ti-0first\\tyes\\tok\\n10.0.1.7\\ti-0abc1234\\tchecked\\tok\\n"
      "10.0.1.9\\ti-0third\\tfailed-health\\tslow";
  auto r = run(aws_user_data(aws_options(), kPublicKey),
               "10.0.1.3\\t10.0.1.7\\t10.0.1.9\\t10.0.1.11", 4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile.candidate"),
            "10.0.1.3 slots=8\n10.0.1.7 slots=8\n10.0.1.9 slots=8\n10.0.1.11 slots=8\n");
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile"), "10.0.1.3 slots=8\n10.0.1.7 slots=8\n");
  EXPECT_CONTAINS(r.output,
                  "left out of the hostfile, as the cluster bench did not find them ok: "
                  "10.0.1.9 (slow), 10.0.1.11 (not running)");
  EXPECT_TRUE(called("Key=dsx-ready\\,Value=yes")) << calls();
}

// Another node has the lowest address: this one waits for its verdict, then goes on or fails.
TEST_F(CloudNodeScript, OtherNodesWaitForTheirVerdict) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  const std::string peers = "10.0.1.3\\t10.0.1.7";
  states_ = "10.0.1.3\\ti-0first\\tchecked\\tok\\n10.0.1.7\\ti-0abc1234\\tchecked\\tok";
  auto o = aws_options();
  o.count = 2;
  auto r = run(aws_user_data(o, kPublicKey), peers, 4);
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_FALSE(called("dsx launch")) << "only the lowest node benches";
  EXPECT_EQ(read_text(root_ / "etc/dsx/hostfile"), "10.0.1.3 slots=8\n10.0.1.7 slots=8\n");

  std::filesystem::remove(pkg_ / "calls.log");
  std::filesystem::remove(root_ / "etc/dsx/hostfile");
  states_ = "10.0.1.3\\ti-0first\\tchecked\\tok\\n10.0.1.7\\ti-0abc1234\\tchecked\\tslow";
  r = run(aws_user_data(o, kPublicKey), peers, 4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "FAILED in step health: the cluster bench found this node slow");
  EXPECT_TRUE(called("Key=dsx-ready\\,Value=failed-health\n")) << calls();
  EXPECT_FALSE(std::filesystem::exists(root_ / "etc/dsx/hostfile"));

  states_ = "10.0.1.3\\ti-0first\\tchecked\\tNone\\n10.0.1.7\\ti-0abc1234\\tchecked\\tNone";
  r = run(aws_user_data(o, kPublicKey), peers, 4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output, "no verdict from the cluster bench on 10.0.1.3 within 2s");
}

// A node that failed its own checks, or a bench that fails, gives every node the verdict
// failed, so that none waits for the timeout.
TEST_F(CloudNodeScript, ABrokenPeerOrBenchFailsEveryNode) {
  write_text(root_ / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "");
  auto o = aws_options();
  o.count = 2;
  states_ = "10.0.1.7\\ti-0abc1234\\tchecked\\tNone\\n10.0.1.9\\ti-0second\\tfailed-gpus\\tNone";
  auto r = run(aws_user_data(o, kPublicKey), "10.0.1.7\\t10.0.1.9", 4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output,
                  "FAILED in step health: node 10.0.1.9 (dsx-ready=failed-gpus) failed its "
                  "own checks; the cluster bench needs every node");
  for (const char* id : {"i-0abc1234", "i-0second"}) {
    EXPECT_TRUE(called(std::string("--resources ") + id + " --tags Key=dsx-busbw\\,Value=- "
                       "Key=dsx-busbw-all\\,Value=- Key=dsx-health\\,Value=failed\n"))
        << id << calls();
  }
  states_.clear();
  bench_fail_ = "1";
  r = run(aws_user_data(o, kPublicKey), "10.0.1.7\\t10.0.1.9", 4);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.output,
                  "the bench over all 2 nodes failed: see " + root_ / "var/lib/dsx/bench/all.txt");
  EXPECT_NE(read_text(root_ / "var/lib/dsx/bench/all.txt").find("rank 9: allreduce failed"),
            std::string::npos);
}

// GCP labels cannot hold '.': the figures are written with '_', and A3 High benches all_gather,
// the collective its reference figure is for.
TEST_F(CloudNodeScript, GcpBenchLabelsTheFiguresWithoutDots) {
  package_ = "dsx.tar.gz";
  auto o = gcp_options("a3-highgpu-8g");
  o.dsx_package = "gs://dsx-artifacts/dsx.tar.gz";
  auto r = run(gcp_startup_script(o, kPublicKey), "10.128.0.7\\n10.128.0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output << calls();
  EXPECT_TRUE(called("bench comm --backend nccl --op allgather -b 256M -e 2G -f 2\n")) << calls();
  EXPECT_TRUE(called("gcloud compute instances add-labels id-10.128.0.7 --quiet --project=proj-1 "
                     "--zone=us-central1-a "
                     "--labels=dsx-busbw=78_5\\,dsx-busbw-all=78_5\\,dsx-health=ok\n"))
      << calls();
}
