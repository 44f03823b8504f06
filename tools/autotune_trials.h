// One trial of `dsx autotune`: a real `dsx launch ... dsx train` job of the user's command with an
// experiment's ds_config, run to completion (or its timeout) with its output in
// exps_dir/<experiment>/log.txt, and read back: the metrics file it wrote, or why it failed.
// Out of memory is recognised by dsx's exit code 3, a rank killed by SIGKILL (the kernel's OOM
// killer), or dsx's out_of_memory message in the log. Trial.seconds is 0 for a reused result.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/autotune/search.h"

namespace dsx::tools {

struct TrialSetup {
  std::string dsx;                         // this binary: the launcher and the program of every trial
  std::vector<std::string> launch_words;   // the user's runner flags, without --master_port
  int master_port = 0;                     // 0: a free port per trial (one-node jobs)
  std::vector<std::string> train_words;    // the user's dsx train flags, without those a trial sets
  std::string base_text, base_path;        // the user's ds_config
  std::string exps_dir;
  int64_t world = 1;
  int64_t train_batch_size = 1;            // of timed trials (probes use micro-batch x ranks)
  int64_t start_profile_step = 3, end_profile_step = 5;
  size_t memory_limit = 0;
  std::chrono::seconds timeout{600};
  // autotuning.overwrite false: a trial whose folder holds the same config and its metrics is
  // not run again (DeepSpeed's resume of an interrupted tuning).
  bool reuse_results = false;
};

autotune::Trial run_trial(const TrialSetup& setup, const autotune::Experiment& experiment);

}  // namespace dsx::tools
