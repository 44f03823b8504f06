// The `deepspeed` runner's flags as `dsx launch` parses them, shared with `dsx autotune`, which
// takes the same flags to start its trials.
#pragma once

#include "launcher/launch_options.h"
#include "tools/cli.h"

namespace dsx::tools {

// Every runner flag, bound to the fields of `o`.
po::options_description launch_options(launcher::LaunchOptions& o);

// Index of the program word: the first word that is neither a flag nor a flag's value (argc
// when there is none).
int find_program(int argc, char** argv, const po::options_description& options);

// `dsx launch --autotuning tune|run`: DeepSpeed's autotuner contract, run by dsx autotune.
// `words` are the launch command's words after "dsx launch", without --autotuning.
int run_autotune_from_launch(const std::string& mode, const std::vector<std::string>& words);

}  // namespace dsx::tools
