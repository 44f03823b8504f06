// `dsx version`: the version and the options this binary was built with.
#include <iostream>

#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/simd.h"
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
  std::cout << "cpu kernels: " << kernels::simd_level_name(kernels::simd_level()) << "\n";
  std::cout << "blas: " << kernels::cpu::blas_description() << "\n";
  std::cout << "blas kernels: " << kernels::cpu::blas_core_name() << "\n";
  return 0;
}

}  // namespace dsx::tools
