// ds_config -> ZeRO options and LR schedule (see training_setup.h).
#include "engine/training_setup.h"

#include "dsx/error.h"
#include "engine/offload_options.h"
#include "kernels/cpu/gemm_bf16.h"

namespace dsx::engine {
namespace {

kernels::DType dtype_named(const std::string& name) {
  if (name == "fp16") return kernels::DType::F16;
  if (name == "bf16") return kernels::DType::BF16;
  return kernels::DType::F32;
}

// betas[i] as written, or the ds_config default's where the file gave fewer.
float beta(const config::OptimizerParams& p, size_t i) {
  const std::vector<double>& betas = p.betas.size() > i ? p.betas : config::OptimizerParams{}.betas;
  return static_cast<float>(betas[i]);
}

// lr and weight_decay, which every optimizer takes, and the two betas of those with moments.
template <class Hyper>
void rate_and_decay_from(Hyper& h, const config::OptimizerParams& p) {
  h.lr = static_cast<float>(p.lr);
  h.weight_decay = static_cast<float>(p.weight_decay);
}
template <class Hyper>
void moments_from(Hyper& h, const config::OptimizerParams& p) {
  rate_and_decay_from(h, p);
  h.beta1 = beta(p, 0);
  h.beta2 = beta(p, 1);
}

zero::OptimizerSpec optimizer_from(const config::OptimizerConfig& o) {
  zero::OptimizerSpec spec;
  const config::OptimizerParams& p = o.params;
  const std::string& name = o.name;
  if (!o.type || name == "adam" || name == "adamw") {
    // No optimizer block: DeepSpeed would take the client's optimizer; dsx trains with AdamW.
    spec.type = zero::OptimizerType::Adam;
    moments_from(spec.adam, p);
    spec.adam.eps = static_cast<float>(p.eps);
    spec.adam.adam_w_mode = p.adam_w_mode || name == "adamw";
    spec.adam.bias_correction = p.bias_correction;
    if (p.amsgrad) {
      throw Error(ErrorKind::Unsupported,
                  "optimizer.params.amsgrad: true is not supported (DeepSpeed's FusedAdam rejects it "
                  "too); remove it or set it to false");
    }
  } else if (name == "lamb") {
    spec.type = zero::OptimizerType::Lamb;
    moments_from(spec.lamb, p);
    spec.lamb.eps = static_cast<float>(p.eps);
    spec.lamb.bias_correction = p.bias_correction;
    spec.lamb.max_coeff = static_cast<float>(p.max_coeff);
    spec.lamb.min_coeff = static_cast<float>(p.min_coeff);
    spec.lamb.eps_inside_sqrt = p.eps_inside_sqrt;
  } else if (name == "lion") {
    spec.type = zero::OptimizerType::Lion;
    moments_from(spec.lion, p);
  } else if (name == "SGD") {
    spec.type = zero::OptimizerType::Sgd;
    rate_and_decay_from(spec.sgd, p);
    spec.sgd.momentum = static_cast<float>(p.momentum);
    spec.sgd.dampening = static_cast<float>(p.dampening);
    spec.sgd.nesterov = p.nesterov;
  } else if (name == "adagrad") {
    spec.type = zero::OptimizerType::Adagrad;
    rate_and_decay_from(spec.adagrad, p);
    spec.adagrad.eps = static_cast<float>(p.eps);
  } else {
    throw Error(ErrorKind::Unsupported, "optimizer.type \"" + *o.type +
                                            "\" is valid for DeepSpeed but dsx has no kernel for it; use "
                                            "Adam, AdamW, Lamb, Lion, SGD or Adagrad");
  }
  return spec;
}

// zero_optimization keys DeepSpeed honours at stages 0-3 that change nothing in a dsx run on the
// host, said at start-up when they are set away from their defaults (docs/zero.md lists them).
void note_ignored_zero_keys(const config::ZeroConfig& z, std::vector<std::string>& notes) {
  const config::ZeroConfig d;
  auto note = [&](bool set, const std::string& key, const std::string& why) {
    if (set) notes.push_back("zero_optimization." + key + " changes nothing in dsx: " + why);
  };
  const bool stage12 = z.stage == 1 || z.stage == 2;
  note(stage12 && z.round_robin_gradients, "round_robin_gradients",
       "it spreads consecutive gradients over ranks for ZeRO-Offload's copies; dsx keeps DeepSpeed's default "
       "partition order and the optimizer already runs in host memory");
  note(stage12 && !z.use_multi_rank_bucket_allreduce, "use_multi_rank_bucket_allreduce",
       "with reduce_scatter each owner receives its run of a bucket through one reduce-scatter either way");
  const bool swapped = z.offload_optimizer && z.offload_optimizer->device == "nvme";
  note(z.stage == 3 && !swapped && z.sub_group_size != d.sub_group_size, "sub_group_size",
       "DeepSpeed steps the optimizer sub-group by sub-group to bound its fp32 gradient copies and to swap "
       "to NVMe; dsx's gradients are fp32 already and the partition is updated in one pass");
  note(z.stage == 3 && z.use_all_reduce_for_fetch_params, "use_all_reduce_for_fetch_params",
       "parameters are always fetched with an allgather (the same values, half the bytes of an allreduce)");
  note(z.zero_hpz_partition_size > 1, "zero_hpz_partition_size",
       "ZeRO++'s secondary partition within a node is not implemented; parameters are gathered over the "
       "whole data-parallel group");
  note(z.zero_quantized_weights || z.zero_quantized_nontrainable_weights || z.zero_quantized_gradients,
       "zero_quantized_weights/zero_quantized_gradients",
       "ZeRO++'s quantized communication is not implemented; weights and gradients travel in "
       "communication_data_type");
  note(!z.ignore_unused_parameters, "ignore_unused_parameters",
       "dsx's models give every parameter a gradient in every backward, so there is no unused one to refuse");
  note(!z.load_from_fp32_weights, "load_from_fp32_weights",
       "checkpoints always restore the fp32 master partitions (the model runs in fp32 on the host)");
}

}  // namespace

zero::ZeroOptions zero_options_from(const config::EngineConfig& config, std::vector<std::string>& notes) {
  const config::ZeroConfig& z = config.zero_optimization;
  zero::ZeroOptions o;
  static_cast<config::ZeroPartitioning&>(o) = z;  // the partitioning keys, by type
  o.comm_dtype = dtype_named(config.communication_data_type);
  o.gradient_predivide_factor = config.gradient_predivide_factor;
  o.prescale_gradients = config.prescale_gradients;
  o.gradient_clipping = config.gradient_clipping;
  o.optimizer = optimizer_from(config.optimizer);
  if (config.gradient_allreduce_op == "sum") {
    // "sum": no averaging over ranks (DeepSpeed post-v0.19.5).
    o.average_gradients = false;
    notes.push_back("gradient_allreduce_op \"sum\": gradients are summed over ranks, not averaged");
  }
  if (config.fp16.enabled) {
    o.loss_scaler.dynamic = config.fp16.dynamic();
    o.loss_scaler.static_scale = config.fp16.dynamic() ? 1.0 : config.fp16.loss_scale;
    o.loss_scaler.initial_scale_power = static_cast<int>(config.fp16.initial_scale_power);
    o.loss_scaler.window = config.fp16.loss_scale_window;
    o.loss_scaler.hysteresis = static_cast<int>(config.fp16.hysteresis);
    o.loss_scaler.consecutive_hysteresis = config.fp16.consecutive_hysteresis;
    o.loss_scaler.min_scale = static_cast<double>(config.fp16.min_loss_scale);
    o.loss_scaler.zero_semantics = o.stage > 0;
    o.check_overflow = true;
  } else {
    o.loss_scaler.dynamic = false;
    o.loss_scaler.static_scale = 1.0;
    o.check_overflow = config.bf16.enabled && config.bf16.check_grad_overflow && o.stage > 0;
  }
  note_ignored_zero_keys(z, notes);
  offload_from(config, o, notes);
  return o;
}

std::string precision_note(const config::EngineConfig& config, bool model_on_gpu) {
  if (!config.fp16.enabled && !config.bf16.enabled) return "";
  const std::string dtype = config.fp16.enabled ? "fp16" : "bf16";
  std::string math;
  if (model_on_gpu) {
    math = "the model's weights, activations and matmuls are " + dtype +
           " (fp32 accumulation), beside fp32 master weights and optimizer state";
  } else if (config.fp16.enabled) {
    math = "the model computes in fp32";
  } else {
    math = "GPT-2's matmuls take bf16 operands, the rest computes in fp32 (" +
           kernels::cpu::bf16_gemm_choice().note + ")";
  }
  return dtype + (model_on_gpu ? " on the GPU: " : " on the CPU: ") + math + "; gradients travel in " +
         config.communication_data_type + (config.fp16.enabled ? " with DeepSpeed's loss scaling" : "");
}

std::optional<LrSchedule> lr_schedule_from(const config::EngineConfig& config) {
  const config::SchedulerConfig& s = config.scheduler;
  if (!s.type) return std::nullopt;
  return LrSchedule(*s.type, s.params, config.optimizer.params.lr);
}

}  // namespace dsx::engine
