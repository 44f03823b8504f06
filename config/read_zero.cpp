// zero_optimization: the field list (fields.h) plus what a list can't say: the legacy boolean
// form, overlap_comm's stage-dependent default, the offload sub-blocks, and DeepSpeed's
// deprecated keys with their "not together with the new one" rule.
#include "config/fields.h"
#include "config/readers.h"

namespace dsx::config::detail {

namespace {

constexpr const char* kZero = "zero_optimization";

template <class Offload>
void read_offload(ReadContext& ctx, BlockReader& zero, const char* key, std::optional<Offload>& out) {
  const json::Member* m = zero.take(key);
  if (!m) return;
  const std::string path = zero.path(key);
  const json::Value* obj = object_of(ctx, m, path, /*null_ok=*/true);
  if (!obj) return;
  Offload offload;
  BlockReader r(ctx, obj, path, Extra::Forbid);
  visit(r, offload);
  r.finish();
  out = offload;
}

// A deprecated boolean that switches an offload block on: cpu_offload -> offload_optimizer.
template <class Offload>
void read_deprecated_offload(ReadContext& ctx, BlockReader& zero, const char* old_key,
                             const char* new_key, std::optional<Offload>& out) {
  const json::Member* m = zero.take(old_key);
  if (!m) return;
  const std::string old_path = zero.path(old_key);
  if (zero.present(new_key)) {
    ctx.error(old_path, m->key_pos,
              std::string("Cannot provide deprecated parameter '") + old_key +
                  "' and replacing parameter '" + new_key + "' together. Remove '" + old_key + "'.");
    return;
  }
  bool on = false;
  std::string why;
  if (!convert(m->value, on, Spec{}, why)) {
    ctx.error(old_path, m->value.pos, why);
    return;
  }
  ctx.warn(old_path, m->key_pos,
           std::string("Config parameter ") + old_key + " is deprecated use " + new_key +
               " instead (dsx maps it: " + new_key + ".device = " + (on ? "\"cpu\"" : "none") + ").");
  if (!on) return;
  Offload offload;
  offload.device = "cpu";
  out = offload;
  ctx.record(zero.path(new_key) + ".device", Source::Derived, m->value.pos, std::string("from deprecated ") + old_key);
}

}  // namespace

void read_zero(ReadContext& ctx, const json::Member* member, const json::Value& top) {
  ZeroConfig& z = ctx.config.zero_optimization;
  if (member && member->value.type == json::Type::Bool) {
    // Legacy form: true = stage 1 with the top-level allgather_size; false = stage 0.
    z.stage = member->value.boolean ? 1 : 0;
    ctx.record("zero_optimization.stage", Source::Derived, member->value.pos,
               "from the legacy \"zero_optimization\": " + std::string(member->value.boolean ? "true" : "false"));
    ctx.warn(kZero, member->value.pos,
             std::string("\"zero_optimization\": ") + (member->value.boolean ? "true" : "false") +
                 " is deprecated; write \"zero_optimization\": {\"stage\": " + (member->value.boolean ? "1" : "0") + "}.");
    if (member->value.boolean) {
      if (const json::Member* size = top.find_member("allgather_size")) {
        std::string why;
        if (convert(size->value, z.allgather_bucket_size, at_least(0), why))
          ctx.record("zero_optimization.allgather_bucket_size", Source::Derived, size->value.pos, "from allgather_size");
        else
          ctx.error("allgather_size", size->value.pos, why);
      }
    }
    z.overlap_comm = false;
    return;
  }
  const json::Value* obj = member ? object_of(ctx, member, kZero) : nullptr;
  BlockReader r(ctx, obj, kZero, Extra::Forbid);
  reject_removed_zero_keys(ctx, r, obj);
  visit(r, z);  // stage first: the "auto" rules of the stage-3 keys depend on it
  std::optional<bool> overlap;
  r.field("overlap_comm", overlap);
  if (overlap) {
    z.overlap_comm = *overlap;
  } else {
    z.overlap_comm = default_overlap_comm(z.stage);
    ctx.record("zero_optimization.overlap_comm", Source::Derived, {}, "true for stage 3 only");
  }
  read_offload(ctx, r, "offload_param", z.offload_param);
  read_offload(ctx, r, "offload_optimizer", z.offload_optimizer);
  read_deprecated_offload(ctx, r, "cpu_offload", "offload_optimizer", z.offload_optimizer);
  read_deprecated_offload(ctx, r, "cpu_offload_param", "offload_param", z.offload_param);

  if (const json::Member* m = r.take("cpu_offload_use_pin_memory")) {
    ctx.warn(r.path("cpu_offload_use_pin_memory"), m->key_pos,
             "Config parameter cpu_offload_use_pin_memory is deprecated and has no effect; set "
             "offload_optimizer.pin_memory / offload_param.pin_memory instead.");
  }
  if (const json::Member* m = r.take("stage3_gather_fp16_weights_on_model_save")) {
    const std::string old_path = r.path("stage3_gather_fp16_weights_on_model_save");
    if (r.present("gather_16bit_weights_on_model_save") || r.present("stage3_gather_16bit_weights_on_model_save")) {
      ctx.error(old_path, m->key_pos,
                "Cannot provide deprecated parameter 'stage3_gather_fp16_weights_on_model_save' and "
                "replacing parameter 'gather_16bit_weights_on_model_save' together. Remove the old one.");
    } else {
      std::string why;
      if (convert(m->value, z.gather_16bit_weights_on_model_save, Spec{}, why)) {
        ctx.record("zero_optimization.gather_16bit_weights_on_model_save", Source::File, m->value.pos,
                   "deprecated name stage3_gather_fp16_weights_on_model_save");
        ctx.warn(old_path, m->key_pos,
                 "Config parameter stage3_gather_fp16_weights_on_model_save is deprecated use "
                 "gather_16bit_weights_on_model_save instead.");
      } else {
        ctx.error(old_path, m->value.pos, why);
      }
    }
  }
  r.finish();
}

}  // namespace dsx::config::detail

namespace dsx::config {

json::Value default_leaf_module() {
  return json::parse(R"({"classes": ["transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
                                     "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
                                     "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"],
                         "names": [], "name_suffixes": []})",
                     "DeepSpeed's leaf_module default");
}

}  // namespace dsx::config
