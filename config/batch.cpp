// DeepSpeed's batch triad (ref/ds_config.md §2): derive, then assert in this order.
#include "config/batch.h"

namespace dsx::config {

BatchTriad solve_batch_triad(std::optional<int64_t> T, std::optional<int64_t> M,
                             std::optional<int64_t> G, int64_t W) {
  BatchTriad b;
  // Products of user-written numbers can exceed int64: report instead of overflowing.
  auto product = [&b](int64_t x, int64_t y, int64_t z) {
    int64_t xy = 0, xyz = 0;
    if (__builtin_mul_overflow(x, y, &xy) || __builtin_mul_overflow(xy, z, &xyz)) {
      b.error = "the batch sizes are too large: " + std::to_string(x) + " * " + std::to_string(y) +
                " * " + std::to_string(z) + " does not fit in 64 bits";
      return int64_t{0};
    }
    return xyz;
  };
  // Python's // floors; for the negative values a user might write, C++'s / truncates.
  auto floordiv = [](int64_t a, int64_t d) {
    int64_t q = a / d;
    return (a % d != 0 && ((a < 0) != (d < 0))) ? q - 1 : q;
  };
  if (T && M && G) {
    b = {*T, *M, *G, {}};
  } else if (T && M) {
    b = {*T, *M, *M == 0 ? 0 : floordiv(floordiv(*T, *M), W), {}};
    if (*M == 0) b.error = "Micro batch size per gpu: 0 has to be greater than 0";
  } else if (T && G) {
    b = {*T, *G == 0 ? 0 : floordiv(floordiv(*T, W), *G), *G, {}};
    if (*G == 0) b.error = "Gradient accumulation steps: 0 has to be greater than 0";
  } else if (M && G) {
    b = {product(*M, *G, W), *M, *G, b.error};
  } else if (T) {
    b = {*T, floordiv(*T, W), 1, {}};
  } else if (M) {
    b = {product(*M, 1, W), *M, 1, b.error};
  } else {
    b.error = "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided";
    return b;
  }
  if (!b.error.empty()) return b;
  if (b.train_batch_size <= 0) {
    b.error = "Train batch size: " + std::to_string(b.train_batch_size) + " has to be greater than 0";
  } else if (b.train_micro_batch_size_per_gpu <= 0) {
    b.error = "Micro batch size per gpu: " + std::to_string(b.train_micro_batch_size_per_gpu) +
              " has to be greater than 0";
  } else if (b.gradient_accumulation_steps <= 0) {
    b.error = "Gradient accumulation steps: " + std::to_string(b.gradient_accumulation_steps) +
              " has to be greater than 0";
  } else if (int64_t expected = product(b.train_micro_batch_size_per_gpu,
                                         b.gradient_accumulation_steps, W);
             !b.error.empty() || b.train_batch_size != expected) {
    if (!b.error.empty()) return b;
    b.error = "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
              "gradient_acc_step * world_size " +
              std::to_string(b.train_batch_size) + " != " +
              std::to_string(b.train_micro_batch_size_per_gpu) + " * " +
              std::to_string(b.gradient_accumulation_steps) + " * " + std::to_string(W);
  }
  return b;
}

}  // namespace dsx::config
