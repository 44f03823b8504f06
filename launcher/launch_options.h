// Every flag of the `deepspeed` runner, with DeepSpeed's names and defaults, plus the few dsx
// additions (marked). tools/cmd_launch.cpp fills this from the command line.
#pragma once

#include <string>
#include <vector>

#include "dsx/master_port.h"

namespace dsx::launcher {

struct LaunchOptions {
  std::string hostfile = "/job/hostfile";
  std::string include;
  std::string exclude;
  int num_nodes = -1;
  int num_gpus = -1;
  int num_accelerators = -1;  // DeepSpeed's other name for num_gpus (used when num_gpus is not given)
  bool num_gpus_given = false;  // dsx: --num_gpus/--num_accelerators given explicitly (then it must be >= 1)
  int min_elastic_nodes = -1;
  int max_elastic_nodes = -1;
  int master_port = kDefaultMasterPort;
  std::string master_addr;
  int node_rank = -1;
  std::string launcher = "pdsh";
  bool launcher_given = false;  // --launcher given explicitly (pdsh missing is then an error)
  std::string launcher_args;
  bool module = false;
  bool no_python = false;
  bool no_local_rank = false;
  bool no_ssh = false;
  bool no_ssh_check = false;
  bool force_multi = false;
  bool save_pid = false;
  std::string enable_each_rank_log = "None";
  std::string autotuning;
  bool elastic_training = false;
  bool bind_cores_to_rank = false;
  std::string bind_core_list;
  int ssh_port = -1;  // -1: not given
  std::string venv_script;
  std::string log_level = "info";
  bool quiet = false;

  // dsx additions
  bool dry_run = false;             // print the command for every node and exit
  std::string local_rank_rule = "modulo";  // "modulo" (DeepSpeed) or "index" (torchrun)
  int kill_grace_s = 30;            // SIGTERM -> SIGKILL grace when stopping ranks
  int max_restarts = 0;             // torchrun's: restarts of the whole job after a failure
  int restart_count = 0;            // internal: which restart a remote agent belongs to

  std::string user_script;
  std::vector<std::string> user_args;
};

}  // namespace dsx::launcher
