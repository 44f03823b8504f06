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

  const std::string optimizer_device =
      zero.offload_optimizer ? zero.offload_optimizer->device : "none";
  const std::string param_device = zero.offload_param ? zero.offload_param->device : "none";
  if (zero.params_offloaded() && !zero.optimizer_offloaded()) {
    throw Error(ErrorKind::Unsupported,
                path +
                    ": offload_param without offload_optimizer is not modelled; "
                    "estimate with both (--offload param) or neither");
  }
  // DeepSpeed takes NVMe at stage 3 only; stages 1 and 2 treat "nvme" as "cpu", and so do we.
  const bool nvme = zero.stage == 3 && (optimizer_device == "nvme" || param_device == "nvme");
  if (nvme && zero.params_offloaded() && optimizer_device != param_device) {
    throw Error(ErrorKind::Unsupported,
                path + ": offload_optimizer.device is " + optimizer_device +
                    " and offload_param.device is " + param_device +
                    "; dsx estimate models both on the CPU or both on NVMe (--offload param or "
                    "nvme-param)");
  }

  DsConfigChoices c;
  c.option.stage = static_cast<int>(zero.stage);
  if (nvme) {
    c.option.offload = zero.params_offloaded() ? Offload::OptimizerAndParamsNvme : Offload::OptimizerNvme;
  } else {
    c.option.offload = zero.params_offloaded()      ? Offload::OptimizerAndParams
                       : zero.optimizer_offloaded() ? Offload::Optimizer
                                                    : Offload::None;
  }
  c.sub_group_size = zero.sub_group_size;
  if (zero.offload_optimizer) c.optimizer_buffer_count = zero.offload_optimizer->buffer_count;
  if (zero.offload_param) {
    c.param_buffer_count = zero.offload_param->buffer_count;
    c.param_buffer_size = zero.offload_param->buffer_size;
  }
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
