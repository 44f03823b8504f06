// optimizer and scheduler: DeepSpeed's name resolution (its own optimizers in any case, torch's
// by exact class name; schedules by exact name) and the params each one takes.
#include <algorithm>
#include <optional>

#include "dsx/join.h"
#include "config/closest_key.h"
#include "config/fields.h"
#include "config/readers.h"

namespace dsx::config::detail {

namespace {

// DeepSpeed 0.19.8's own optimizers (1-bit Adam, 0/1 Adam and 1-bit LAMB were removed).
const std::vector<std::string> kDeepSpeedOptimizers = {"adagrad", "adam",   "adamw", "lamb", "muadam",
                                                       "muadamw", "musgd", "lion",  "muon"};
const std::vector<std::string> kRemovedOptimizers = {"onebitadam", "zerooneadam", "onebitlamb"};
const std::vector<std::string> kTorchOptimizers = {
    "ASGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS",
    "Muon", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam"};
// dsx checks the params of these (and implements them in kernels/).
const std::vector<std::string> kCheckedOptimizers = {"adam", "adamw", "lamb", "lion", "adagrad", "SGD"};

const std::vector<std::string> kDeepSpeedSchedules = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
                                                      "OneCycle", "LRRangeTest"};
const std::vector<std::string> kTorchSchedules = {
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
    "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau",
    "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR"};

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// The closest of DeepSpeed's and torch's names to a misspelt type, for "Did you mean".
std::optional<std::string> closest_name(const std::string& type, const std::vector<std::string>& own,
                                        const std::vector<std::string>& torch) {
  std::vector<std::string> all = own;
  all.insert(all.end(), torch.begin(), torch.end());
  return closest_key(type, all);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The head of a block that names a type and carries params (optimizer, scheduler): `more` reads
// its other keys; params without a type are ignored with a warning. Returns where the type was
// written and the params member, or nothing when there is no type (nothing more to read).
struct TypedBlock {
  const json::Value* type_value;
  const json::Member* params;
};

template <class More>
std::optional<TypedBlock> read_typed_block(ReadContext& ctx, const json::Member* member, const std::string& name,
                                           std::optional<std::string>& type, More more) {
  const json::Value* obj = object_of(ctx, member, name);
  if (!obj) return std::nullopt;
  BlockReader r(ctx, obj, name, Extra::Warn);
  const bool has_type = r.field("type", type);
  more(r);
  const json::Member* params = r.take("params");
  r.finish();
  if (!has_type || !type) {
    if (params) ctx.warn(name + ".params", params->key_pos, name + ".params without " + name + ".type is ignored.");
    return std::nullopt;
  }
  return TypedBlock{&obj->find_member("type")->value, params};
}

}  // namespace

void read_optimizer(ReadContext& ctx, const json::Member* member) {
  OptimizerConfig& o = ctx.config.optimizer;
  const auto block = read_typed_block(ctx, member, "optimizer", o.type,
                                      [&](BlockReader& r) { r.field("legacy_fusion", o.legacy_fusion); });
  if (!block) return;
  const json::Value& type_value = *block->type_value;
  const json::Member* params = block->params;
  if (contains(kDeepSpeedOptimizers, lower(*o.type))) {
    o.name = lower(*o.type);
  } else if (contains(kTorchOptimizers, *o.type)) {
    o.name = *o.type;
  } else {
    const auto near = closest_name(*o.type, kDeepSpeedOptimizers, kTorchOptimizers);
    ctx.error("optimizer.type", type_value.pos,
              *o.type + " is not a supported DeepSpeed Optimizer. DeepSpeed's own (any case): " +
                  join(kDeepSpeedOptimizers, ", ") + "; torch.optim classes by exact name: " + join(kTorchOptimizers, ", ") +
                  "." + (contains(kRemovedOptimizers, lower(*o.type)) ? " DeepSpeed removed 1-bit Adam, 0/1 Adam and 1-bit LAMB." : "") +
                  (near ? " Did you mean '" + *near + "'?" : ""));
    return;
  }
  ctx.record("optimizer.name", Source::Derived, type_value.pos, "DeepSpeed's name for \"" + *o.type + "\"");
  o.known = contains(kCheckedOptimizers, o.name);
  // torch's defaults where they differ from DeepSpeed's fused ones.
  if (o.name == "adagrad") {
    o.params.lr = optimizer_defaults::kAdagradLr;
    o.params.eps = optimizer_defaults::kAdagradEps;
  }
  const json::Value* p = params ? object_of(ctx, params, "optimizer.params", /*null_ok=*/true) : nullptr;
  if (p) o.raw_params = *p;
  if (p) {
    if (const json::Member* mg = p->find_member("max_grad_norm")) {
      ctx.error("optimizer.params.max_grad_norm", mg->key_pos,
                "DeepSpeed rejects max_grad_norm in optimizer params (ValueError): clipping is the "
                "top-level \"gradient_clipping\". Move the value there.");
    }
  }
  if (!o.known) {
    ctx.warn("optimizer.type", type_value.pos,
             "dsx reads the params of " + join(kCheckedOptimizers, ", ") + "; the params of '" + o.name +
                 "' are kept as written and not checked.");
    return;
  }
  BlockReader pr(ctx, p, "optimizer.params", Extra::Kwargs);
  pr.known({"max_grad_norm"});
  visit_optimizer_params(pr, o.params, o.name);
  pr.finish();
  if (o.name == "adamw" && !o.params.adam_w_mode) {
    o.params.adam_w_mode = true;
    ctx.record("optimizer.params.adam_w_mode", Source::Derived, ctx.config.origin("optimizer.params.adam_w_mode").pos,
               "AdamW always decouples weight decay");
    ctx.warn("optimizer.params.adam_w_mode", ctx.config.origin("optimizer.params.adam_w_mode").pos,
             "adam_w_mode: false is ignored for type AdamW (DeepSpeed ignores it too); use type \"Adam\" "
             "with adam_w_mode: false for L2-style weight decay.");
  }
}

void read_scheduler(ReadContext& ctx, const json::Member* member) {
  SchedulerConfig& s = ctx.config.scheduler;
  const auto block = read_typed_block(ctx, member, "scheduler", s.type, [](BlockReader&) {});
  if (!block) return;
  const json::Value& type_value = *block->type_value;
  const json::Member* params = block->params;
  s.known = contains(kDeepSpeedSchedules, *s.type);
  if (!s.known && !contains(kTorchSchedules, *s.type)) {
    const auto near = closest_name(*s.type, kDeepSpeedSchedules, kTorchSchedules);
    ctx.error("scheduler.type", type_value.pos,
              "DeepSpeed does not recognize LR scheduler " + *s.type + " (names are case-sensitive: " +
                  join(kDeepSpeedSchedules, ", ") + ", or a torch.optim.lr_scheduler class)." +
                  (near ? " Did you mean '" + *near + "'?" : ""));
    return;
  }
  if (!params) {
    ctx.error("scheduler.params", type_value.pos,
              "scheduler \"" + *s.type + "\" has no \"params\"; DeepSpeed fails without them. Add \"params\": {...}.");
    return;
  }
  const json::Value* p = object_of(ctx, params, "scheduler.params");
  if (!p) return;
  s.raw_params = *p;
  if (!s.known) {
    ctx.warn("scheduler.type", type_value.pos,
             "dsx runs DeepSpeed's schedules (" + join(kDeepSpeedSchedules, ", ") + "); the params of torch's " +
                 *s.type + " are kept as written and not checked.");
    return;
  }
  SchedulerParams& sp = s.params;
  if (*s.type == "WarmupDecayLR") sp.warmup_max_lr = kWarmupDecayMaxLr;
  BlockReader pr(ctx, p, "scheduler.params", Extra::Kwargs);
  visit_scheduler_params(pr, sp, *s.type);
  pr.finish();

  auto require = [&](const char* key, bool given) {
    if (!given) {
      ctx.error(std::string("scheduler.params.") + key, params->value.pos,
                "scheduler " + *s.type + " needs \"" + key + "\". Add it to scheduler.params.");
    }
  };
  if (*s.type == "WarmupDecayLR" || *s.type == "WarmupCosineLR") require("total_num_steps", sp.total_num_steps.has_value());
  if (*s.type == "OneCycle") {
    require("cycle_min_lr", sp.cycle_min_lr.has_value());
    require("cycle_max_lr", sp.cycle_max_lr.has_value());
    if (!sp.cycle_second_step_size) {
      sp.cycle_second_step_size = sp.cycle_first_step_size;
      ctx.record("scheduler.params.cycle_second_step_size", Source::Derived, {}, "= cycle_first_step_size");
    }
    if (!sp.cycle_second_stair_count) {
      sp.cycle_second_stair_count = sp.cycle_first_stair_count;
      ctx.record("scheduler.params.cycle_second_stair_count", Source::Derived, {}, "= cycle_first_stair_count");
    }
  }
  if ((*s.type == "WarmupLR" || *s.type == "WarmupDecayLR") && !sp.warmup_max_lr && ctx.config.optimizer.type) {
    sp.warmup_max_lr = ctx.config.optimizer.params.lr;  // null means "the optimizer's lr"
    ctx.record("scheduler.params.warmup_max_lr", Source::Derived, {}, "the optimizer's lr");
  }
  if (*s.type == "WarmupDecayLR" && sp.total_num_steps && *sp.total_num_steps < sp.warmup_num_steps) {
    ctx.warn("scheduler.params.total_num_steps", ctx.config.origin("scheduler.params.total_num_steps").pos,
             "total_num_steps is smaller than warmup_num_steps: the learning rate decays to 0 during warmup.");
  }
}

}  // namespace dsx::config::detail
