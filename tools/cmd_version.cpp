// `dsx version`: the version and the options this binary was built with.
#include <iostream>

#include "tools/cli.h"

namespace dsx::tools {

int run_version(int argc, char** argv) {
  po::options_description options("dsx version");
  auto args = parse_args(argc, argv, "dsx version", options);
  if (args.help) return 0;
  std::cout << "dsx " << DSX_VERSION << "\n";
#ifdef DSX_HAVE_CUDA
  std::cout << "cuda: built in\n";
#else
  std::cout << "cuda: not built (CPU-only build)\n";
#endif
  return 0;
}

}  // namespace dsx::tools
