// Every shell script dsx ships or renders passes shellcheck, and the Slurm job is complete.
#include <gtest/gtest.h>

#include <filesystem>

#include "cloud/aws_render.h"
#include "cloud/gcp_render.h"
#include "cloud/instance_types.h"
#include "cloud/slurm_job.h"
#include "tests/cloud/temp_dir.h"
#include "tests/tools/run_command.h"

using namespace dsx::cloud;

namespace {

std::string shellcheck(const std::vector<std::string>& files) {
  std::string command = "shellcheck --shell=bash --severity=style";
  for (const auto& f : files) command += " " + f;
  auto r = dsx::test::run_command(command);
  return r.exit_code == 0 ? "" : "exit " + std::to_string(r.exit_code) + "\n" + r.output;
}

}  // namespace

TEST(CloudScripts, SourceScriptsPassShellcheck) {
  ASSERT_EQ(dsx::test::run_command("shellcheck --version").exit_code, 0)
      << "shellcheck is missing: run tools/setup.sh (Debian package shellcheck)";
  const std::string root = DSX_SOURCE_DIR;
  EXPECT_EQ(shellcheck({root + "/cloud/node/common.sh", root + "/cloud/node/health.sh", root + "/cloud/aws/user-data.sh",
                        root + "/cloud/gcp/startup.sh", root + "/cloud/slurm/dsx-train.sbatch",
                        root + "/tests/cloud/recorder.sh",
                        root + "/tests/cloud/check_gcloud_commands.sh"}),
            "");
}

TEST(CloudScripts, EveryRenderedScriptPassesShellcheck) {
  dsx::test::TempDir dir;
  std::vector<std::string> scripts;
  for (const auto& type : aws_instance_types()) {
    AwsClusterOptions o;
    o.cluster = "lint";
    o.region = "eu-west-1";
    o.instance_type = std::string(type.name);
    o.subnet = "subnet-0aaa";
    o.ssh_cidr = "10.0.0.0/8";
    o.dsx_package = "https://example.com/dsx it's.tar.gz";  // a quote must stay quoted
    o.out_dir = dir / ("aws-" + o.instance_type);
    for (const auto& f : render_aws(o)) {
      if (f.ends_with(".sh") || f.ends_with(".sbatch")) scripts.push_back(f);
    }
  }
  for (const auto& type : gcp_machine_types()) {
    GcpClusterOptions o;
    o.cluster = "lint";
    o.project = "proj-1";
    o.zone = "europe-west4-b";
    o.machine_type = std::string(type.name);
    o.ssh_cidr = "35.235.240.0/20";
    if (!type.on_demand) o.reservation = "lint-reservation";  // else render refuses the type
    o.out_dir = dir / ("gcp-" + o.machine_type);
    for (const auto& f : render_gcp(o)) {
      if (f.ends_with(".sh") || f.ends_with(".sbatch")) scripts.push_back(f);
    }
  }
  // user data/startup, up, down, sbatch per type
  ASSERT_EQ(scripts.size(), 4 * (aws_instance_types().size() + gcp_machine_types().size()));
  EXPECT_EQ(shellcheck(scripts), "");
  EXPECT_EQ(dsx::test::run_command("bash -n " + dir / "aws-p5.48xlarge/aws/user-data.sh").exit_code,
            0);
}

// With shared storage up.sh and down.sh wait for file systems (their dsx_wait function), and
// every up.sh refuses a missing image: both pass shellcheck too.
TEST(CloudScripts, PrintedWaitsAndImageChecksPassShellcheck) {
  dsx::test::TempDir dir;
  AwsClusterOptions o;
  o.cluster = "lint";
  o.region = "eu-west-1";
  o.subnet = "subnet-0aaa";
  o.ssh_cidr = "10.0.0.0/8";
  o.storage = "efs";
  o.out_dir = dir / "aws";
  render_aws(o);
  const std::string up = dsx::test::read_text(dir / "aws/aws/up.sh");
  EXPECT_NE(up.find("dsx_wait 'wait until the EFS mount target is available'"), std::string::npos)
      << up;
  EXPECT_NE(up.find("if ! IMAGE_STATE=$("), std::string::npos) << up;
  EXPECT_EQ(shellcheck({dir / "aws/aws/up.sh", dir / "aws/aws/down.sh"}), "");
}

TEST(CloudScripts, SlurmJobAsksForTheWholeAllocation) {
  std::string job = render_slurm_job(16, 8);
  EXPECT_NE(job.find("#SBATCH --nodes=16\n"), std::string::npos);
  EXPECT_NE(job.find("#SBATCH --ntasks-per-node=8\n"), std::string::npos);
  EXPECT_NE(job.find("#SBATCH --gpus-per-node=8\n"), std::string::npos);
  EXPECT_EQ(job.find("{{"), std::string::npos) << "every placeholder filled";
  // Each task gets the torchrun variables from its own Slurm ids.
  for (const char* var :
       {"RANK=$SLURM_PROCID", "LOCAL_RANK=$SLURM_LOCALID", "WORLD_SIZE=$SLURM_NTASKS",
        "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE", "MASTER_ADDR MASTER_PORT"}) {
    EXPECT_NE(job.find(var), std::string::npos) << var;
  }
}

// The job without a command explains itself instead of starting nothing on every GPU.
TEST(CloudScripts, SlurmJobWithoutACommandIsAUsageError) {
  dsx::test::TempDir dir;
  dsx::test::write_text(dir / "job.sbatch", render_slurm_job(2, 8), true);
  auto r = dsx::test::run_command("bash " + dir / "job.sbatch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("usage: sbatch"), std::string::npos) << r.output;
}
