// Parsing shared by all subcommands.
#include "tools/cli.h"

#include <cstdlib>
#include <iostream>
#include <utility>

#include "dsx/error.h"

namespace dsx::tools {

ParsedArgs parse_args(int argc, char** argv, const std::string& usage,
                      const po::options_description& options,
                      const po::positional_options_description* positional) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help and exit");
  ParsedArgs parsed;
  try {
    auto parser = po::command_line_parser(argc, argv).options(all);
    if (positional) parser.positional(*positional);
    auto options_seen = parser.run();
    // Without a positional description Boost drops bare words silently: refuse them by name.
    for (const auto& option : options_seen.options) {
      if (!positional && option.position_key >= 0 && !option.value.empty()) {
        throw Error(ErrorKind::Usage, std::string(argv[0]) + ": unexpected word '" +
                                          option.value.front() +
                                          "': this command takes only options (see --help)");
      }
    }
    po::store(options_seen, parsed.vars);
    if (parsed.vars.count("help")) {
      std::cout << "usage: " << usage << "\n\n" << all << "\n";
      parsed.help = true;
      return parsed;
    }
    po::notify(parsed.vars);
  } catch (const po::error& e) {
    throw Error(ErrorKind::Usage, std::string(argv[0]) + ": " + e.what() + " (see --help)");
  }
  return parsed;
}

size_t parse_byte_size(const std::string& text, const std::string& what) {
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},     {"K", 0x1p10},   {"M", 0x1p20},   {"G", 0x1p30},   {"T", 0x1p40},
      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"KB", 1e3},
      {"MB", 1e6},  {"GB", 1e9},  {"TB", 1e12}};
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : std::string();
  for (const auto& [name, scale] : kUnits) {
    if (unit != name || end == text.c_str() || !(value > 0) || value * scale > 0x1p62) continue;
    return static_cast<size_t>(value * scale);
  }
  throw Error(ErrorKind::Usage, what + " '" + text + "' is not a size like 4096, 512M, 2GiB or 1.5GB");
}

}  // namespace dsx::tools
