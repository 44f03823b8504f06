// `dsx trace merge DIR`: the rank traces of `dsx train --profile DIR` joined into one file, so
// one viewer shows every rank's timeline together (docs/profiling.md).
#include <iostream>

#include "dsx/error.h"
#include "tools/cli.h"
#include "trace/merge_traces.h"

namespace dsx::tools {

int run_trace(int argc, char** argv) {
  po::options_description options("dsx trace");
  options.add_options()
      ("verb", po::value<std::string>(), "merge")
      ("dir", po::value<std::string>(), "the --profile directory of dsx train")
      ("out", po::value<std::string>(), "the merged file (default: DIR/all_ranks.trace.json)");
  po::positional_options_description positional;
  positional.add("verb", 1).add("dir", 1);
  auto args = parse_args(argc, argv, "dsx trace merge DIR [--out FILE]", options, &positional);
  if (args.help) return 0;
  auto& v = args.vars;
  if (!v.count("verb") || v["verb"].as<std::string>() != "merge" || !v.count("dir")) {
    throw Error(ErrorKind::Usage, "dsx trace: write `dsx trace merge DIR` (DIR: the one dsx train --profile wrote)");
  }
  const std::string dir = v["dir"].as<std::string>();
  const std::string out = v.count("out") ? v["out"].as<std::string>() : dir + "/all_ranks.trace.json";
  const auto files = trace::rank_trace_files(dir);
  const size_t spans = trace::merge_traces(files, out);
  std::cout << "dsx trace: " << files.size() << " rank trace(s), " << spans << " spans -> " << out
            << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

}  // namespace dsx::tools
