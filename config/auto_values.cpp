// "auto": what Hugging Face's DeepSpeed integration writes in place of each "auto" key, from
// TrainingArguments (here: dsx's command line) and the model's hidden size. Batch keys are not
// here: an "auto" batch key is solved by the batch triad (read_ds_config.cpp), which gives the
// same numbers as Hugging Face's world x micro x accumulation.
#include <cmath>

#include "config/readers.h"

namespace dsx::config::detail {

namespace {

AutoResolution resolved(json::Value value, std::string note) {
  return AutoResolution{AutoResolution::Resolved, std::move(value), std::move(note)};
}
AutoResolution needs(std::string flag) {
  return AutoResolution{AutoResolution::NeedsInput, {}, std::move(flag)};
}

}  // namespace

AutoResolution resolve_hf_auto(const ReadContext& ctx, const std::string& path) {
  const ConfigInputs& in = ctx.inputs;
  const double lr = in.learning_rate.value_or(5e-5);
  const std::string lr_note = in.learning_rate ? "--lr" : "Hugging Face's default learning_rate (--lr)";
  const std::optional<int64_t> h = in.hidden_size;
  const bool stage3 = ctx.config.zero_optimization.stage == 3;

  if (path == "gradient_clipping") return resolved(json::make_double(1.0), "Hugging Face's default max_grad_norm");
  if (path == "fp16.enabled" || path == "bf16.enabled")
    return resolved(json::make_bool(false), "Hugging Face's default (no --fp16/--bf16 training argument)");
  if (path == "optimizer.params.lr") return resolved(json::make_double(lr), lr_note);
  if (path == "optimizer.params.betas") {
    json::Value betas;
    betas.type = json::Type::Array;
    betas.items = {json::make_double(0.9), json::make_double(0.999)};
    return resolved(betas, "Hugging Face's default adam_beta1, adam_beta2");
  }
  if (path == "optimizer.params.eps") return resolved(json::make_double(1e-8), "Hugging Face's default adam_epsilon");
  if (path == "optimizer.params.weight_decay")
    return resolved(json::make_double(0.0), "Hugging Face's default weight_decay");
  if (path == "scheduler.params.warmup_min_lr") return resolved(json::make_double(0.0), "Hugging Face fills 0");
  if (path == "scheduler.params.warmup_max_lr") return resolved(json::make_double(lr), lr_note);
  if (path == "scheduler.params.warmup_num_steps") {
    // Hugging Face writes max(1, warmup steps): DeepSpeed >= 0.19.6 rejects 0.
    if (in.warmup_steps) return resolved(json::make_int(*in.warmup_steps), "--warmup-steps");
    return resolved(json::make_int(1), "Hugging Face's max(1, warmup_steps) without --warmup-steps");
  }
  if (path == "scheduler.params.total_num_steps") {
    if (in.total_steps) return resolved(json::make_int(*in.total_steps), in.total_steps_flag);
    return needs(in.total_steps_flag);
  }
  if (path == "zero_optimization.reduce_bucket_size") {
    if (h) return resolved(json::make_int(*h * *h), "hidden_size^2 (--hidden-size)");
    return needs("--hidden-size");
  }
  if (path == "zero_optimization.prefetch_bucket_size" && stage3) {
    // int(0.9 * h * h), as current transformers writes it (older ones wrote a float).
    if (h) return resolved(json::make_int(static_cast<int64_t>(0.9 * static_cast<double>(*h * *h))),
                           "int(0.9 * hidden_size^2) (--hidden-size)");
    return needs("--hidden-size");
  }
  if (path == "zero_optimization.param_persistence_threshold" && stage3) {
    if (h) return resolved(json::make_int(10 * *h), "10 * hidden_size (--hidden-size)");
    return needs("--hidden-size");
  }
  return AutoResolution{};
}

}  // namespace dsx::config::detail
