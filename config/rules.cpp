// The rules that tie keys of different blocks together, as DeepSpeed checks them at config
// construction or engine init (ref/ds_config.md §7.5), plus dsx's warnings for settings that
// DeepSpeed accepts but that have no effect.
#include <cmath>

#include "config/readers.h"

namespace dsx::config::detail {

namespace {

bool one_of_names(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

// Where a key was written, for the message.
auto at(const EngineConfig& c, const std::string& path) { return c.origin(path).pos; }

// fp16/bf16 and data_types agree with each other and with ZeRO.
void check_precision(ReadContext& ctx) {
  const EngineConfig& c = ctx.config;
  const ZeroConfig& z = c.zero_optimization;
  if (c.fp16.enabled && c.bf16.enabled) {
    ctx.error("bf16.enabled", at(c, "bf16.enabled"),
              "bfloat16 and fp16 modes cannot be simultaneously enabled. Turn one off.");
  }
  if (c.fp16.enabled && c.fp16.dynamic()) {
    if (c.fp16.loss_scale_window <= 0)
      ctx.error("fp16.loss_scale_window", at(c, "fp16.loss_scale_window"),
                "must be greater than 0 with dynamic loss scaling, got " + std::to_string(c.fp16.loss_scale_window) +
                    ". Use e.g. 1000, or set a static \"loss_scale\".");
    if (c.fp16.min_loss_scale <= 0)
      ctx.error("fp16.min_loss_scale", at(c, "fp16.min_loss_scale"),
                "must be greater than 0 with dynamic loss scaling, got " + std::to_string(c.fp16.min_loss_scale) + ".");
    if (c.fp16.initial_scale_power < 0 || c.fp16.initial_scale_power > 127)
      ctx.error("fp16.initial_scale_power", at(c, "fp16.initial_scale_power"),
                "must be between 0 and 127 (the scale is 2^power in fp32), got " +
                    std::to_string(c.fp16.initial_scale_power) + ".");
  }
  if (c.fp16.fp16_master_weights_and_grads && (z.stage == 0 || !z.optimizer_offloaded())) {
    ctx.error("fp16.fp16_master_weights_and_grads", at(c, "fp16.fp16_master_weights_and_grads"),
              "needs ZeRO stage 1, 2 or 3 with offload_optimizer (CPU Adam). Enable those or set it to false.");
  }
  if (c.bf16.bf16_optimizer_states && !c.bf16.bf16_master_weights_and_grads) {
    ctx.error("bf16.bf16_optimizer_states", at(c, "bf16.bf16_optimizer_states"),
              "requires bf16_master_weights_and_grads: true.");
  }
  if (c.bf16.bf16_master_weights_and_grads && z.stage == 0) {
    ctx.error("bf16.bf16_master_weights_and_grads", at(c, "bf16.bf16_master_weights_and_grads"),
              "needs ZeRO stage 1, 2 or 3.");
  }
  if (c.data_types.param_dtype && *c.data_types.param_dtype != c.model_dtype()) {
    ctx.error("data_types.param_dtype", at(c, "data_types.param_dtype"),
              "is " + *c.data_types.param_dtype + " but the model dtype (from fp16/bf16.enabled) is " +
                  c.model_dtype() + "; they must agree. Change one of them or remove param_dtype.");
  }
  if (!c.zero_enabled() && c.data_types.grad_accum_dtype && *c.data_types.grad_accum_dtype != c.model_dtype()) {
    ctx.error("data_types.grad_accum_dtype", at(c, "data_types.grad_accum_dtype"),
              "unsupported mix of model_dtype (" + c.model_dtype() + ") and grad_accum_dtype (" +
                  *c.data_types.grad_accum_dtype + ") without ZeRO. Use ZeRO stage >= 1 or remove grad_accum_dtype.");
  }
}

// The optimizer block: present, tested with ZeRO, supported by the fused kernels.
void check_optimizer(ReadContext& ctx) {
  const EngineConfig& c = ctx.config;
  const ZeroConfig& z = c.zero_optimization;
  const OptimizerConfig& o = c.optimizer;
  const std::string stage = std::to_string(z.stage);
  if (o.type) {
    if (c.fp16.enabled && !c.fp16.dynamic() && o.name == "lamb") {
      ctx.error("fp16.loss_scale", at(c, "fp16.loss_scale"),
                *o.type + " requires dynamic loss scaling. Set fp16.loss_scale to 0.");
    }
    const bool tested = one_of_names(o.name, {"adam", "adamw", "adagrad", "lion", "muon", "Adam", "AdamW", "Adagrad"});
    if (z.stage > 0 && !tested && !c.zero_allow_untested_optimizer) {
      ctx.error("optimizer.type", at(c, "optimizer.name"),
                "You are using an untested ZeRO Optimizer (" + *o.type + "). Please add "
                "\"zero_allow_untested_optimizer\": true in the configuration file to use it.");
    }
    if (o.params.amsgrad && (o.name == "adam" || o.name == "adamw") && !o.params.torch_adam) {
      ctx.error("optimizer.params.amsgrad", at(c, "optimizer.params.amsgrad"),
                "the fused Adam does not support amsgrad. Set it to false (or torch_adam: true).");
    }
  } else {
    // What dsx train then runs, said plainly: it trains, so this is a note, not an error.
    const std::string runs = "dsx train then uses AdamW with DeepSpeed's Adam defaults (lr 0.001, betas (0.9, "
                             "0.999), eps 1e-8, weight_decay 0). Add \"optimizer\": {\"type\": \"AdamW\", "
                             "\"params\": {...}} to choose.";
    ctx.warn("optimizer", {},
             z.stage == 1 || z.stage == 2
                 ? "no optimizer block: DeepSpeed needs the client to pass one for ZeRO stage " + stage + "; " + runs
                 : "no optimizer block: " + runs);
  }
}

// How gradients are averaged across ranks.
void check_reduction(ReadContext& ctx) {
  const EngineConfig& c = ctx.config;
  const ZeroConfig& z = c.zero_optimization;
  if (z.stage == 2 && z.reduce_scatter && c.gradient_allreduce_op == "mean" &&
      (c.gradient_predivide_factor != 1.0 || c.prescale_gradients)) {
    ctx.error(c.prescale_gradients ? "prescale_gradients" : "gradient_predivide_factor",
              at(c, c.prescale_gradients ? "prescale_gradients" : "gradient_predivide_factor"),
              "ZeRO stage 2 with reduce_scatter averages gradients itself: gradient_predivide_factor must be 1.0 "
              "and prescale_gradients false. Change them, or set zero_optimization.reduce_scatter to false.");
  }
  if (c.gradient_allreduce_op == "sum" && z.stage == 3) {
    ctx.error("gradient_allreduce_op", at(c, "gradient_allreduce_op"),
              "\"sum\" is not supported with ZeRO stage 3. Use \"mean\".");
  }
}

// ZeRO's own keys: removed ones, offload and its NVMe paths.
void check_zero(ReadContext& ctx) {
  const EngineConfig& c = ctx.config;
  const ZeroConfig& z = c.zero_optimization;
  const std::string stage = std::to_string(z.stage);
  if (z.legacy_stage1) {
    ctx.error("zero_optimization.legacy_stage1", at(c, "zero_optimization.legacy_stage1"),
              "legacy_stage1 is no longer supported by DeepSpeed. Remove it.");
  }
  if (z.offload_optimizer && z.offload_optimizer->ratio < 1.0 && z.stage < 3) {
    ctx.error("zero_optimization.offload_optimizer.ratio", at(c, "zero_optimization.offload_optimizer.ratio"),
              "Partial offloading only supported for ZeRO Stage 3 (stage is " + stage + "). Use ratio 1.0 or stage 3.");
  }
  if (z.optimizer_offloaded() && z.stage == 0) {
    ctx.warn("zero_optimization.offload_optimizer", at(c, "zero_optimization.offload_optimizer.device"),
             "offload_optimizer has no effect at ZeRO stage 0. Use stage 1, 2 or 3.");
  }
  if (z.params_offloaded() && z.stage != 3) {
    ctx.warn("zero_optimization.offload_param", at(c, "zero_optimization.offload_param.device"),
             "offload_param is used by ZeRO stage 3 only; at stage " + stage + " it has no effect (DeepSpeed "
             "accepts it silently).");
  }
  auto needs_nvme_path = [&](const std::string& block, const std::string& device,
                             const std::optional<std::string>& nvme_path) {
    if (device == "nvme" && !nvme_path) {
      ctx.error("zero_optimization." + block + ".nvme_path", at(c, "zero_optimization." + block + ".device"),
                "device \"nvme\" needs nvme_path (a directory on the NVMe drive). Add it.");
    }
  };
  if (z.offload_optimizer) needs_nvme_path("offload_optimizer", z.offload_optimizer->device, z.offload_optimizer->nvme_path);
  if (z.offload_param) needs_nvme_path("offload_param", z.offload_param->device, z.offload_param->nvme_path);
}

// The autotuning block.
void check_tuning(ReadContext& ctx) {
  const EngineConfig& c = ctx.config;
  // autotuning: with metric_path the run is a profiled trial (what DeepSpeed's autotuner
  // writes into its experiments); without it the tuner is `dsx autotune`, not the config.
  const AutotuningConfig& tune = c.autotuning;
  if (tune.enabled && tune.start_profile_step >= tune.end_profile_step) {
    ctx.error("autotuning.end_profile_step", at(c, "autotuning.end_profile_step"),
              "end_profile_step (" + std::to_string(tune.end_profile_step) + ") must be above start_profile_step (" +
                  std::to_string(tune.start_profile_step) + "): the steps between them are timed.");
  }
  if (tune.enabled && !tune.metric_path) {
    ctx.warn("autotuning.enabled", at(c, "autotuning.enabled"),
             "without metric_path this trains as usual; to tune, run `dsx autotune` (or `dsx launch "
             "--autotuning tune`), which reads this block.");
  }
}

}  // namespace

void check_rules(ReadContext& ctx) {
  check_precision(ctx);
  check_optimizer(ctx);
  check_reduction(ctx);
  check_zero(ctx);
  check_tuning(ctx);
}

}  // namespace dsx::config::detail
