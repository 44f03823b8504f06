// A benchmark program's flags (boost::program_options): parsed, or the reason it stops first.
#pragma once

#include <boost/program_options.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <sstream>

namespace dsx::bench {

// Parses argv into `vars`. Returns the exit code when the program should stop: 2 after a bad
// flag (the message goes to stderr, after `program`), 0 after printing --help; nullopt to run.
inline std::optional<int> parse_bench_flags(int argc, char** argv,
                                            const boost::program_options::options_description& flags,
                                            boost::program_options::variables_map& vars,
                                            const char* program) {
  namespace po = boost::program_options;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vars);
    po::notify(vars);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
  if (vars.count("help")) {
    std::printf("%s", (std::stringstream() << flags).str().c_str());
    return 0;
  }
  return std::nullopt;
}

}  // namespace dsx::bench
