// Reads a ds_config: parse, walk the top level and every block, resolve "auto" and the batch
// triad, apply DeepSpeed's derived values and cross-key rules, then report every error at once.

#include "dsx/error.h"
#include "dsx/json_input.h"
#include "config/batch.h"
#include "config/elastic_batch.h"
#include "config/fields.h"
#include "config/readers.h"

namespace dsx::config {

const char* to_string(Source source) {
  switch (source) {
    case Source::Default: return "default";
    case Source::File: return "file";
    case Source::Derived: return "derived";
    case Source::Auto: return "auto";
  }
  return "?";
}

const Origin& EngineConfig::origin(const std::string& path) const {
  static const Origin kDefault;
  auto it = origins.find(path);
  return it == origins.end() ? kDefault : it->second;
}

namespace detail {

const json::Value* object_of(ReadContext& ctx, const json::Member* m, const std::string& path, bool null_ok) {
  if (!m) return nullptr;
  if (m->value.type == json::Type::Object) return &m->value;
  if (m->value.is_null() && null_ok) return nullptr;
  ctx.error(path, m->value.pos,
            std::string("expected an object { ... }, got ") + json::type_name(m->value.type) + " " +
                json::to_string(m->value).substr(0, 40) + ".");
  return nullptr;
}

namespace {

// Blocks DeepSpeed reads that dsx keeps as written (EngineConfig::other_blocks).
const std::vector<std::string> kKeptBlocks = {
    "pipeline", "data_efficiency", "hybrid_engine", "tensor_parallel", "expert_parallel",
    "compile", "timers", "weight_quantization", "model_info", "datastates_ckpt"};


template <class Block>
void read_block(ReadContext& ctx, BlockReader& top, const char* key, Block& block, Extra extra) {
  const json::Value* obj = object_of(ctx, top.take(key), key);
  if (!obj) return;
  BlockReader r(ctx, obj, key, extra);
  visit(r, block);
  r.finish();
}

// A batch key: a number, "auto" (then the command-line flag, or solved by the triad), or absent
// (then the flag if given). A flag that contradicts a number in the file is an error, as in
// Hugging Face's integration.
// The largest batch size, micro-batch or accumulation count: the training loop holds them in int.
constexpr int64_t kMaxBatchValue = 2147483647;

std::optional<int64_t> read_batch_key(ReadContext& ctx, BlockReader& top, const char* key,
                                      std::optional<int64_t> flag, const char* flag_name, bool& was_auto) {
  const json::Member* m = top.take(key);
  std::optional<int64_t> value;
  was_auto = m && m->value.is_string("auto");
  if (m && !was_auto) {
    std::string why;
    // The engine counts samples and steps in int: larger values would wrap, never train.
    Spec fits;
    fits.max = kMaxBatchValue;
    if (!convert(m->value, value, fits, why)) {
      ctx.error(key, m->value.pos, why + " (the most dsx can hold)");
      return std::nullopt;
    }
    if (value) ctx.record(key, Source::File, m->value.pos);
  }
  if (flag) {
    if (value && *value != *flag) {
      ctx.error(key, m->value.pos,
                "the file says " + std::to_string(*value) + " but " + flag_name + " says " +
                    std::to_string(*flag) + ". Set it to \"auto\" in the file, or drop the flag.");
      return value;
    }
    if (!m) {
      // Hugging Face fills only "auto" values; an absent key stays DeepSpeed's default there.
      ctx.warn(key, {},
               std::string("not in the file: ") + flag_name + " " + std::to_string(*flag) +
                   " fills it (the Hugging Face route fills only \"auto\" values and would use the default); "
                   "write \"" + key + "\": \"auto\" to say so in the file");
    }
    ctx.record(key, Source::Auto, m ? m->value.pos : json::Position{}, flag_name);
    return flag;
  }
  return value;
}

// An elastic launch's world may differ from the one the batch keys were written for: keep
// train_batch_size, re-cut micro-batch and accumulation (config/elastic_batch.h). False after an
// error (no micro-batch keeps the global batch on this world).
bool rebatch_elastic(ReadContext& ctx, int64_t T, int64_t M, std::optional<int64_t> G) {
  EngineConfig& c = ctx.config;
  const int64_t W = c.dp_world_size;
  // The world the keys describe: T / (M x G) when all three are given and divide, else this one.
  const bool described = G && *G > 0 && M > 0 && T % (M * *G) == 0;
  const int64_t written_world = described ? T / (M * *G) : W;
  const int64_t written_acc = G ? *G : std::max<int64_t>(1, T / std::max<int64_t>(1, M * W));
  ElasticBatch e = rebatch_for_world(T, M, written_acc, written_world, W);
  if (!e.ok()) {
    ctx.error("train_batch_size", c.origin("train_batch_size").pos,
              e.error + " (an elastic launch keeps the global batch when the world changes).");
    return false;
  }
  c.train_micro_batch_size_per_gpu = e.micro_batch;
  c.gradient_accumulation_steps = e.accumulation;
  if (e.micro_batch != M || (G && e.accumulation != *G)) c.elastic_batch_change = e.change;
  return true;
}

void read_batch(ReadContext& ctx, BlockReader& top) {
  EngineConfig& c = ctx.config;
  const ConfigInputs& in = ctx.inputs;
  const size_t errors_before = ctx.errors.size();
  bool t_auto = false, m_auto = false, g_auto = false;
  auto T = read_batch_key(ctx, top, "train_batch_size", std::nullopt, "", t_auto);
  auto M = read_batch_key(ctx, top, "train_micro_batch_size_per_gpu", in.micro_batch, "--micro-batch", m_auto);
  auto G = read_batch_key(ctx, top, "gradient_accumulation_steps", in.grad_accum, "--grad-accum", g_auto);
  // A batch key already refused (too large, not a number): the triad would only add a second,
  // misleading error ("needs to be provided") about a key the user did write.
  if (ctx.errors.size() > errors_before) return;

  // Data-parallel size: the world divided by the sequence-parallel size (DeepSpeed §0).
  c.world_size = in.world_size;
  c.dp_world_size = in.world_size;
  if (c.sequence_parallel_size) {
    const int64_t sp = *c.sequence_parallel_size;
    if (c.data_parallel_size) {
      if (*c.data_parallel_size * sp != in.world_size) {
        ctx.error("data_parallel_size", c.origin("data_parallel_size").pos,
                  "data_parallel_size " + std::to_string(*c.data_parallel_size) + " x sequence_parallel_size " +
                      std::to_string(sp) + " must equal the world size " + std::to_string(in.world_size) + ".");
        return;
      }
      c.dp_world_size = *c.data_parallel_size;
    } else if (in.world_size % sp != 0) {
      ctx.error("sequence_parallel_size", c.origin("sequence_parallel_size").pos,
                "the world size " + std::to_string(in.world_size) + " is not a multiple of sequence_parallel_size " +
                    std::to_string(sp) + ". Change one of them.");
      return;
    } else {
      c.dp_world_size = in.world_size / sp;
    }
  }
  ctx.record("dp_world_size", Source::Derived, {},
             c.sequence_parallel_size ? "world size / sequence_parallel_size" : "= --world-size");

  if (in.keep_train_batch_size && !T) {
    ctx.warn("train_batch_size", {},
             "an elastic launch keeps the global batch only when train_batch_size is given; "
             "without it the global batch is micro-batch x accumulation x world and changes "
             "with the world. Give train_batch_size to keep it");
  }
  if (in.keep_train_batch_size && T && M) {
    if (!rebatch_elastic(ctx, *T, *M, G)) return;
    G = c.gradient_accumulation_steps;
    M = c.train_micro_batch_size_per_gpu;
  }
  BatchTriad b = solve_batch_triad(T, M, G, c.dp_world_size);
  if (!b.ok()) {
    std::string hint;
    if (!T && !M) {
      hint = (t_auto || m_auto) ? " The batch keys are \"auto\": pass --micro-batch (and --grad-accum)."
                                : " Add train_micro_batch_size_per_gpu (or train_batch_size).";
    } else {
      hint = " With a data-parallel world size of " + std::to_string(c.dp_world_size) +
             ", train_batch_size must equal train_micro_batch_size_per_gpu x gradient_accumulation_steps x " +
             std::to_string(c.dp_world_size) + "; give two of the three and dsx derives the third.";
    }
    json::Position pos = c.origin(T ? "train_batch_size" : "train_micro_batch_size_per_gpu").pos;
    ctx.error("train_batch_size", pos, b.error + "." + hint);
    return;
  }
  c.train_batch_size = b.train_batch_size;
  c.train_micro_batch_size_per_gpu = b.train_micro_batch_size_per_gpu;
  c.gradient_accumulation_steps = b.gradient_accumulation_steps;
  const std::string w = std::to_string(c.dp_world_size);
  if (!T) ctx.record("train_batch_size", t_auto ? Source::Auto : Source::Derived, c.origin("train_batch_size").pos,
                     "= micro x accumulation x " + w);
  if (!M) ctx.record("train_micro_batch_size_per_gpu", m_auto ? Source::Auto : Source::Derived, {},
                     T && G ? "= train_batch_size / " + w + " / accumulation" : "= train_batch_size / " + w);
  if (!G) ctx.record("gradient_accumulation_steps", g_auto ? Source::Auto : Source::Derived, {},
                     T && M ? "= train_batch_size / micro / " + w : "1 when only one batch key is given");
}

void read_precision(ReadContext& ctx, BlockReader& top) {
  EngineConfig& c = ctx.config;
  read_block(ctx, top, "fp16", c.fp16, Extra::Forbid);
  // bf16's legacy name: read only when "bf16" is absent or null.
  const json::Member* bf16 = top.take("bf16");
  const json::Member* legacy = top.take("bfloat16");
  if (bf16 && !bf16->value.is_null()) {
    read_block(ctx, top, "bf16", c.bf16, Extra::Forbid);
    if (legacy)
      ctx.warn("bfloat16", legacy->key_pos, "\"bfloat16\" is ignored because \"bf16\" is given (as in DeepSpeed). Remove it.");
  } else if (legacy) {
    ctx.warn("bfloat16", legacy->key_pos, "\"bfloat16\" is the legacy name of \"bf16\"; dsx reads it as bf16. Rename it.");
    if (const json::Value* obj = object_of(ctx, legacy, "bfloat16")) {
      BlockReader r(ctx, obj, "bf16", Extra::Forbid);
      visit(r, c.bf16);
      r.finish();
    }
  }
  read_block(ctx, top, "torch_autocast", c.torch_autocast, Extra::Warn);

  // communication_data_type: null (the default) = the model's dtype.
  std::optional<std::string> comm;
  top.field("communication_data_type", comm, one_of(comm_dtypes(), true));
  if (comm) {
    c.communication_data_type = *comm;
  } else {
    c.communication_data_type = c.model_dtype();
    ctx.record("communication_data_type", Source::Derived, {}, "the model dtype");
  }
}

std::optional<std::string> canonical_dtype(const std::string& s) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kSpellings = {
      {"fp16", {"fp16", "float16", "half", "torch.float16"}},
      {"fp32", {"fp32", "float32", "float", "torch.float32"}},
      {"bf16", {"bf16", "bfloat16", "torch.bfloat16"}},
      {"int8", {"int8", "torch.int8"}}};
  for (const auto& [canonical, names] : kSpellings)
    for (const auto& n : names)
      if (s == n) return canonical;
  return std::nullopt;
}

void read_data_types(ReadContext& ctx, BlockReader& top) {
  DataTypesConfig& d = ctx.config.data_types;
  const json::Value* obj = object_of(ctx, top.take("data_types"), "data_types");
  if (!obj) return;
  BlockReader r(ctx, obj, "data_types", Extra::Warn);
  for (auto [key, field] : {std::pair{"grad_accum_dtype", &d.grad_accum_dtype},
                            std::pair{"param_dtype", &d.param_dtype}, std::pair{"buffer_dtype", &d.buffer_dtype}}) {
    if (!r.field(key, *field) || !*field) continue;
    if (auto canonical = canonical_dtype(**field)) {
      *field = canonical;
    } else {
      ctx.error(r.path(key), obj->find(key)->pos,
                "unknown dtype \"" + **field + "\". Write fp32, fp16, bf16 (or float32, float16, half, bfloat16, "
                "torch.float32, ...; spellings are case-sensitive).");
      field->reset();
    }
  }
  if (r.field("keep_in_fp32_modules", d.keep_in_fp32_modules)) {
    const json::Value& v = d.keep_in_fp32_modules;
    bool ok = v.is_string("auto") || v.type == json::Type::Array;
    for (const auto& item : v.items) ok = ok && item.type == json::Type::String;
    if (!ok) {
      ctx.error("data_types.keep_in_fp32_modules", v.pos,
                "must be \"auto\" or a list of module-name patterns (strings), got " + json::to_string(v).substr(0, 40) + ".");
    }
  }
  r.finish();
}

void read_checkpoint(ReadContext& ctx, BlockReader& top) {
  CheckpointConfig& c = ctx.config.checkpoint;
  const json::Value* obj = object_of(ctx, top.take("checkpoint"), "checkpoint");
  if (!obj) return;
  BlockReader r(ctx, obj, "checkpoint", Extra::Warn);
  visit(r, c);
  if (const json::Value* pw = object_of(ctx, r.take("parallel_write"), "checkpoint.parallel_write")) {
    BlockReader w(ctx, pw, "checkpoint.parallel_write", Extra::Warn);
    w.field("pipeline_stage", c.parallel_write_pipeline_stage);
    w.finish();
  }
  r.finish();
}

void read_aio(ReadContext& ctx, BlockReader& top) {
  const json::Value* obj = object_of(ctx, top.take("aio"), "aio");
  if (!obj) return;
  BlockReader r(ctx, obj, "aio", Extra::Warn);
  visit(r, ctx.config.aio);
  if (const json::Member* m = r.take("thread_count")) {
    ctx.warn("aio.thread_count", m->key_pos,
             "aio.thread_count was renamed intra_op_parallelism in DeepSpeed v0.16.4 and is now ignored "
             "(by DeepSpeed and dsx). Rename it.");
  }
  r.finish();
}

void read_monitors(ReadContext& ctx, BlockReader& top) {
  EngineConfig& c = ctx.config;
  read_block(ctx, top, "tensorboard", c.tensorboard, Extra::Forbid);
  read_block(ctx, top, "csv_monitor", c.csv_monitor, Extra::Forbid);
  read_block(ctx, top, "wandb", c.wandb, Extra::Forbid);
  read_block(ctx, top, "comet", c.comet, Extra::Forbid);
  if (const json::Value* obj = object_of(ctx, top.take("comms_logger"), "comms_logger")) {
    CommsLoggerConfig logger;
    BlockReader r(ctx, obj, "comms_logger", Extra::Forbid);
    visit(r, logger);
    r.finish();
    c.comms_logger = logger;
  }
}

void read_top(ReadContext& ctx, const json::Value& root) {
  EngineConfig& c = ctx.config;
  BlockReader top(ctx, &root, "", Extra::Warn);
  visit_top(top, c);
  read_precision(ctx, top);
  read_zero(ctx, top.take("zero_optimization"), root);
  read_optimizer(ctx, top.take("optimizer"));
  read_scheduler(ctx, top.take("scheduler"));
  read_data_types(ctx, top);
  read_checkpoint(ctx, top);
  read_aio(ctx, top);
  read_monitors(ctx, top);
  c.activation_checkpointing.given = root.find("activation_checkpointing") != nullptr;
  read_block(ctx, top, "activation_checkpointing", c.activation_checkpointing, Extra::Warn);
  read_block(ctx, top, "flops_profiler", c.flops_profiler, Extra::Warn);
  read_block(ctx, top, "trace", c.trace, Extra::Forbid);
  read_block(ctx, top, "autotuning", c.autotuning, Extra::Warn);
  reject_removed_top_level_keys(ctx, top, &root);
  for (const auto& name : kKeptBlocks)
    if (const json::Member* m = top.take(name.c_str())) c.other_blocks[name] = m->value;
  top.known({"allgather_size"});  // read with the legacy boolean zero_optimization
  if (const json::Member* m = top.take("seq_parallel_comm_data_type")) {
    ctx.warn("seq_parallel_comm_data_type", m->key_pos,
             "seq_parallel_comm_data_type was renamed seq_parallel_communication_data_type in DeepSpeed "
             "v0.16.5 and is now ignored (by DeepSpeed and dsx). Rename it.");
  }
  read_batch(ctx, top);  // after sequence_parallel_size and data_parallel_size are read
  top.finish();

  // Values DeepSpeed derives from others.
  if (c.flops_profiler.enabled && !c.wall_clock_breakdown) {
    c.wall_clock_breakdown = true;
    ctx.record("wall_clock_breakdown", Source::Derived, {}, "on because flops_profiler.enabled");
  }
}

void check_inputs(const ConfigInputs& in) {
  auto bad = [](const std::string& what) { throw Error(ErrorKind::Usage, what); };
  if (in.world_size < 1 || in.world_size > 1'000'000) bad("--world-size must be between 1 and 1000000.");
  if (in.hidden_size && (*in.hidden_size < 1 || *in.hidden_size > 1'000'000))
    bad("--hidden-size must be between 1 and 1000000.");
  if (in.micro_batch && (*in.micro_batch < 1 || *in.micro_batch > 1'000'000'000))
    bad("--micro-batch must be a positive number.");
  if (in.grad_accum && (*in.grad_accum < 1 || *in.grad_accum > 1'000'000'000))
    bad("--grad-accum must be a positive number.");
  if (in.total_steps && *in.total_steps < 1) bad(in.total_steps_flag + " must be a positive number.");
  if (in.warmup_steps && *in.warmup_steps < 1) bad("--warmup-steps must be a positive number.");
  if (in.learning_rate && !(*in.learning_rate >= 0)) bad("--lr must be a non-negative number.");
}

}  // namespace
}  // namespace detail

EngineConfig read_ds_config_text(std::string_view text, const std::string& source, const ConfigInputs& inputs) {
  detail::check_inputs(inputs);
  json::Value root = json::parse(text, source);
  EngineConfig config;
  detail::ReadContext ctx(source, inputs, config);
  ctx.resolve_auto = [&ctx](const std::string& path) { return detail::resolve_hf_auto(ctx, path); };
  detail::read_top(ctx, root);
  if (!ctx.has_errors()) detail::check_rules(ctx);
  if (inputs.strict) {
    for (const auto& w : config.warnings) ctx.error(w.path, w.pos, w.message + " (an error with --strict)");
  }
  if (ctx.has_errors()) ctx.throw_errors();
  return config;
}

EngineConfig read_ds_config_file(const std::string& path, const ConfigInputs& inputs) {
  return read_ds_config_text(read_bounded_file(path, json::kMaxConfigBytes), path, inputs);
}

}  // namespace dsx::config
