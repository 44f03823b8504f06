// fp16's loss-scaling keys with DeepSpeed's defaults, written here once: the reader fills them
// (config::Fp16Config is one) and ZeRO's loss scaler (zero/loss_scaler.h) starts from the same
// numbers.
#pragma once

#include <cstdint>

namespace dsx::config {

struct Fp16LossScaling {
  double loss_scale = 0;  // 0 = dynamic
  int64_t initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  int64_t min_loss_scale = 1;
};

}  // namespace dsx::config
