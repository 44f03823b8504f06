// The offload blocks of the ds_config as ZeRO options (see offload_options.h).
#include "engine/offload_options.h"

namespace dsx::engine {
namespace {

swap::AioOptions aio_from(const config::AioConfig& aio) {
  swap::AioOptions o;
  o.block_size = zero::as_count(aio.block_size);
  o.queue_depth = static_cast<int>(aio.queue_depth);
  o.intra_op_parallelism = static_cast<int>(aio.intra_op_parallelism);
  o.single_submit = aio.single_submit;
  o.overlap_events = aio.overlap_events;
  return o;
}

zero::OptimizerSwapOptions optimizer_swap_from(const config::EngineConfig& config) {
  const config::ZeroConfig& z = config.zero_optimization;
  const config::OffloadOptimizerConfig& off = *z.offload_optimizer;
  zero::OptimizerSwapOptions o;
  o.nvme_path = off.nvme_path.value_or("");
  o.sub_group_size = zero::as_count(z.sub_group_size);
  o.buffer_count = zero::as_count(off.buffer_count);
  o.pipeline_read = off.pipeline_read;
  o.pipeline_write = off.pipeline_write;
  o.pin_memory = off.pin_memory;
  o.swap_master = true;  // DeepSpeed's swapper holds the fp32 parameters with the state
  o.aio = aio_from(config.aio);
  return o;
}

zero::ParamSwapOptions param_swap_from(const config::EngineConfig& config) {
  const config::OffloadParamConfig& off = *config.zero_optimization.offload_param;
  zero::ParamSwapOptions o;
  o.nvme_path = off.nvme_path.value_or("");
  o.buffer_count = zero::as_count(off.buffer_count);
  o.buffer_size = zero::as_count(off.buffer_size);
  o.max_in_cpu = zero::as_count(off.max_in_cpu);
  o.pin_memory = off.pin_memory;
  o.aio = aio_from(config.aio);
  return o;
}

// offload_param: DeepSpeed hands it to its stage-3 optimizer only; below stage 3 it is ignored.
void param_offload_from(const config::EngineConfig& config, zero::ZeroOptions& options,
                        std::vector<std::string>& notes) {
  const config::ZeroConfig& z = config.zero_optimization;
  if (!z.params_offloaded()) return;
  const std::string& device = z.offload_param->device;
  if (z.stage != 3) {
    notes.push_back("offload_param.device \"" + device + "\" at stage " + std::to_string(z.stage) +
                    ": DeepSpeed uses offload_param at stage 3 only and ignores it below, and so "
                    "does dsx: the parameters stay in host memory and nothing is written to "
                    "nvme_path. Use stage 3 to swap them to NVMe");
  } else if (device == "nvme") {
    options.param_nvme = param_swap_from(config);
    notes.push_back("offload_param.device \"nvme\": this rank's parameter shards are swapped to " +
                    options.param_nvme->nvme_path +
                    "/dsx_swap/params; the layers within max_in_cpu elements stay in host memory, "
                    "and the fp32 master partition is kept apart from them (in host memory, or "
                    "with offload_optimizer \"nvme\" in its swap files)");
  } else {
    notes.push_back(
        "offload_param.device \"cpu\": on a CPU run the parameters already live in host memory, "
        "so this offload changes nothing here");
  }
}

}  // namespace

void offload_from(const config::EngineConfig& config, zero::ZeroOptions& options,
                  std::vector<std::string>& notes) {
  const config::ZeroConfig& z = config.zero_optimization;
  const bool optimizer_nvme = z.offload_optimizer && z.offload_optimizer->device == "nvme";
  if (optimizer_nvme && z.stage == 3) {
    options.optimizer_nvme = optimizer_swap_from(config);
    notes.push_back(
        "offload_optimizer.device \"nvme\": the optimizer state is swapped to " +
        options.optimizer_nvme->nvme_path +
        "/dsx_swap in sub-groups of sub_group_size elements, with the fp32 master partition "
        "(as DeepSpeed's optimizer swapper holds the fp32 parameters); the model reads a "
        "separate working copy");
  } else if (optimizer_nvme) {
    notes.push_back("offload_optimizer.device \"nvme\" at stage " + std::to_string(z.stage) +
                    ": DeepSpeed runs it as \"cpu\" below stage 3, and so does dsx: the optimizer "
                    "state stays in "
                    "host memory. Use stage 3 to swap it to NVMe");
  } else if (z.optimizer_offloaded()) {
    notes.push_back(
        "offload_optimizer.device \"cpu\": on a CPU run the optimizer already lives in host "
        "memory, "
        "so this offload changes nothing here");
  }
  param_offload_from(config, options, notes);
  if (config.aio.use_gds)
    notes.push_back("aio.use_gds: GPUDirect Storage is not used; swaps go through host memory");
}

}  // namespace dsx::engine
