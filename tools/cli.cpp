// Parsing shared by all subcommands.
#include "tools/cli.h"

#include <iostream>

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
    po::store(parser.run(), parsed.vars);
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

}  // namespace dsx::tools
