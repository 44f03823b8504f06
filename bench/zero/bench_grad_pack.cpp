// The host work of one ZeRO-2 gradient bucket on a rank besides its collective, beside a memcpy of
// the same bytes (the limit), on one thread: packing the bucket into the communication buffer
// scaled by 1/N, as GradReducer does it (one pass) and as it did before (zero the buffer, scale
// the gradients in place, copy them), and adding this rank's reduced block into its gradient
// partition (the unpack). Sizes default to issue 36's job (GPT-2 L6 C384 on 2 ranks: a bucket of
// 30,062,592 fp32 elements). Each figure is the best of --reps runs, the variants alternating.
// usage: build/bench/zero/bench_grad_pack [--elements N] [--ranks N] [--reps N]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/best_time.h"
#include "kernels/reduce.h"

namespace {

using dsx::kernels::DType;

struct Args {
  size_t elements = 30'062'592;
  size_t ranks = 2;
  int reps = 15;
};

// Exits with parse_bench_flags' code after a bad flag or --help.
Args parse(int argc, char** argv) {
  namespace po = boost::program_options;
  Args a;
  po::options_description flags("bench_grad_pack");
  flags.add_options()("help,h", "show this help")(
      "elements", po::value(&a.elements)->default_value(a.elements), "fp32 elements in the bucket")(
      "ranks", po::value(&a.ranks)->default_value(a.ranks),
      "ranks (the bucket is scaled by 1/ranks)")("reps", po::value(&a.reps)->default_value(a.reps),
                                                 "runs of each variant; the best counts");
  po::variables_map vars;
  if (auto code = dsx::bench::parse_bench_flags(argc, argv, flags, vars, "bench_grad_pack"))
    std::exit(*code);
  if (a.elements < a.ranks || a.ranks == 0 || a.reps <= 0) {
    std::fprintf(
        stderr,
        "bench_grad_pack: --ranks and --reps must be positive and --elements at least --ranks\n");
    std::exit(2);
  }
  return a;
}

void row(const char* what, double ms, double limit_ms, size_t bytes_moved) {
  std::printf("| %s | %.2f | %.2f | %.2f | %.1f |\n", what, ms, limit_ms, limit_ms / ms,
              bytes_moved / ms / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  omp_set_num_threads(1);  // one rank's thread, as in the job (OMP_NUM_THREADS=1)
  const size_t n = a.elements, block = n / a.ranks, bytes = n * sizeof(float);
  const float pre = 1.0f / static_cast<float>(a.ranks);
  std::vector<float> grads(n), comm(n), partition(block, 0.0f);
  for (size_t i = 0; i < n; ++i) grads[i] = static_cast<float>(i % 1000) * 1e-3f - 0.5f;
  auto copy = [&] { std::memcpy(comm.data(), grads.data(), bytes); };
  auto one_pass = [&] {
    dsx::kernels::sum_blocks(DType::F32, grads.data(), 1, 0, pre, DType::F32, comm.data(), n,
                             false);
  };
  auto zero_scale_copy = [&] {  // scales the gradients in place: undone, untimed, after each call
    std::memset(comm.data(), 0, bytes);
    dsx::kernels::scale(DType::F32, grads.data(), pre, n);
    std::memcpy(comm.data(), grads.data(), bytes);
  };
  auto block_copy = [&] { std::memcpy(partition.data(), comm.data(), block * sizeof(float)); };
  auto unpack = [&] {
    dsx::kernels::sum_blocks(DType::F32, comm.data(), 1, 0, 1.0f, DType::F32, partition.data(),
                             block, true);
  };
  // The variants alternate, so a burst of load hits every one alike.
  double best[5] = {1e300, 1e300, 1e300, 1e300, 1e300};
  for (int r = 0; r < a.reps; ++r) {
    best[0] = std::min(best[0], dsx::bench::best_ms(1, copy, 0));
    best[1] = std::min(best[1], dsx::bench::best_ms(1, one_pass, 0));
    best[2] = std::min(best[2], dsx::bench::best_ms(1, zero_scale_copy, 0));
    dsx::kernels::scale(DType::F32, grads.data(), static_cast<float>(a.ranks), n);
    best[3] = std::min(best[3], dsx::bench::best_ms(1, block_copy, 0));
    best[4] = std::min(best[4], dsx::bench::best_ms(1, unpack, 0));
  }
  std::printf("bucket %zu fp32 elements, %zu ranks, one thread, best of %d\n", n, a.ranks, a.reps);
  std::printf(
      "| work | ms | memcpy-speed limit ms | limit / ms | GB/s moved "
      "|\n|---|---:|---:|---:|---:|\n");
  std::printf("| memcpy of the bucket | %.2f | | | %.1f |\n", best[0], 2.0 * bytes / best[0] / 1e6);
  row("pack, one pass (dsx)", best[1], best[0], 2 * bytes);
  row("pack, zero + scale + copy (before)", best[2], best[0], 5 * bytes);
  row("unpack: partition += reduced block", best[4], 1.5 * best[3], 3 * block * sizeof(float));
  return 0;
}
