// Shared command-line plumbing for subcommands: parse with Boost.Program_options, answer --help,
// turn a parse failure into a usage error that names the subcommand.
#pragma once

#include <boost/program_options.hpp>
#include <cstddef>
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

// A byte count as users write it: 4096, 1.5G, 512MB, 2GiB. K/M/G/T and KiB/MiB/GiB/TiB are
// powers of 1024 (as in nccl-tests' -b/-e), KB/MB/GB/TB powers of 1000. Throws
// dsx::Error(Usage) naming `what` (e.g. "dsx train: --device_memory").
size_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace dsx::tools
