// ds_config → estimate inputs, through engine/config's reader (all its checks and warnings apply).
#include "tools/estimate/ds_config_choices.h"

#include <utility>

#include "dsx/error.h"
#include "config/ds_config.h"

namespace dsx::estimate {

DsConfigChoices read_ds_config_choices(const std::string& path, int64_t world_size,
                                       int64_t hidden_size, std::optional<int64_t> micro_batch) {
  config::ConfigInputs inputs;
  inputs.world_size = world_size;
  inputs.hidden_size = hidden_size;
  inputs.micro_batch = micro_batch;
  const auto config = config::read_ds_config_file(path, inputs);
  const auto& zero = config.zero_optimization;

  for (const auto& [what, device] :
       {std::pair<std::string, std::string>{
            "offload_optimizer", zero.offload_optimizer ? zero.offload_optimizer->device : "none"},
        {"offload_param", zero.offload_param ? zero.offload_param->device : "none"}}) {
    if (device == "nvme") {
      throw Error(ErrorKind::Unsupported,
                  path + ": zero_optimization." + what +
                      ".device is nvme; dsx estimate models CPU offload only (try --offload)");
    }
  }
  if (zero.params_offloaded() && !zero.optimizer_offloaded()) {
    throw Error(ErrorKind::Unsupported,
                path +
                    ": offload_param without offload_optimizer is not modelled; "
                    "estimate with both (--offload param) or neither");
  }

  DsConfigChoices c;
  c.option.stage = static_cast<int>(zero.stage);
  c.option.offload = zero.params_offloaded()      ? Offload::OptimizerAndParams
                     : zero.optimizer_offloaded() ? Offload::Optimizer
                                                  : Offload::None;
  c.micro_batch = config.train_micro_batch_size_per_gpu;
  const auto dtype = config.model_dtype();
  c.precision = dtype == "bf16"   ? Precision::Bf16
                : dtype == "fp16" ? Precision::Fp16
                                  : Precision::Fp32;
  c.reduce_bucket_size = zero.reduce_bucket_size;
  c.prefetch_bucket_size = zero.prefetch_bucket_size;
  c.overlap_comm = zero.overlap_comm;
  return c;
}

}  // namespace dsx::estimate
