// Shared command-line plumbing for subcommands: parse with Boost.Program_options, answer --help,
// turn a parse failure into a usage error that names the subcommand.
#pragma once

#include <boost/program_options.hpp>
#include <string>

namespace dsx::tools {

namespace po = boost::program_options;

struct ParsedArgs {
  po::variables_map vars;
  bool help = false;  // --help was given and has been printed: return 0
};

// Parses argv against `options` (and `positional`, if any). Prints `usage` + the options on
// --help. Throws dsx::Error(Usage) on unknown options or bad values.
ParsedArgs parse_args(int argc, char** argv, const std::string& usage,
                      const po::options_description& options,
                      const po::positional_options_description* positional = nullptr);

}  // namespace dsx::tools
