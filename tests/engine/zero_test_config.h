// The ds_config of the Trainer tests that train on real ranks at every ZeRO stage: micro-batch 2,
// 2 accumulation steps, AdamW (lr 0.01, weight decay 0.1, DeepSpeed's betas and eps), overlapped
// buckets small enough that the test models span several, and stage 3's prefetch and persistence
// thresholds below their sizes.
#pragma once

#include <string>

#include "config/ds_config.h"

namespace dsx::test {

inline config::EngineConfig zero_test_config(int stage, int world, double gradient_clipping,
                                             int reduce_bucket_size) {
  const std::string text =
      R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": )" +
      std::to_string(gradient_clipping) +
      R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}},
    "zero_optimization": {"stage": )" +
      std::to_string(stage) + R"(, "overlap_comm": true, "reduce_bucket_size": )" +
      std::to_string(reduce_bucket_size) +
      R"(, "stage3_prefetch_bucket_size": 2000, "stage3_param_persistence_threshold": 100}})";
  config::ConfigInputs inputs;
  inputs.world_size = world;
  return config::read_ds_config_text(text, "test config", inputs);
}

}  // namespace dsx::test
