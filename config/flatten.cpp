// Every effective value as "dotted.path = JSON", walked with the same field lists the reader
// uses (fields.h), so a key can't be read without being listed.
#include "config/fields.h"

namespace dsx::config {

namespace {

json::Value to_json(bool b) { return json::make_bool(b); }
json::Value to_json(int64_t n) { return json::make_int(n); }
json::Value to_json(double d) { return json::make_double(d); }
json::Value to_json(const std::string& s) { return json::make_string(s); }
json::Value to_json(const json::Value& v) { return v; }
template <class T>
json::Value to_json(const std::optional<T>& v) {
  return v ? to_json(*v) : json::make_null();
}
template <class T>
json::Value to_json(const std::vector<T>& list) {
  json::Value v;
  v.type = json::Type::Array;
  for (const auto& item : list) v.items.push_back(to_json(item));
  return v;
}

class Printer {
 public:
  Printer(const EngineConfig& config, std::vector<FlatEntry>& out, std::string prefix)
      : config_(config), out_(out), prefix_(std::move(prefix)) {}

  template <class T>
  void field(const char* key, const T& value, const detail::Spec& = {}) {
    add(key, to_json(value));
  }
  void add(const std::string& key, const json::Value& value) {
    std::string path = prefix_.empty() ? key : prefix_ + "." + key;
    out_.push_back(FlatEntry{path, json::to_string(value), config_.origin(path)});
  }

 private:
  const EngineConfig& config_;
  std::vector<FlatEntry>& out_;
  std::string prefix_;
};

template <class Block>
void print_block(const EngineConfig& c, std::vector<FlatEntry>& out, const std::string& prefix, Block block) {
  Printer p(c, out, prefix);
  detail::visit(p, block);
}

}  // namespace

std::vector<FlatEntry> flatten(const EngineConfig& config) {
  EngineConfig c = config;  // the visitors take non-const references
  std::vector<FlatEntry> out;
  Printer top(c, out, "");
  top.field("train_batch_size", c.train_batch_size);
  top.field("train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu);
  top.field("gradient_accumulation_steps", c.gradient_accumulation_steps);
  top.field("dp_world_size", c.dp_world_size);
  detail::visit_top(top, c);
  top.field("communication_data_type", c.communication_data_type);

  Printer opt(c, out, "optimizer");
  opt.field("type", c.optimizer.type);
  if (c.optimizer.type) {
    opt.field("name", c.optimizer.name);
    opt.field("legacy_fusion", c.optimizer.legacy_fusion);
    if (c.optimizer.known) {
      Printer params(c, out, "optimizer.params");
      detail::visit_optimizer_params(params, c.optimizer.params, c.optimizer.name);
    } else {
      opt.field("params", c.optimizer.raw_params);
    }
  }
  Printer sched(c, out, "scheduler");
  sched.field("type", c.scheduler.type);
  if (c.scheduler.type) {
    if (c.scheduler.known) {
      Printer params(c, out, "scheduler.params");
      detail::visit_scheduler_params(params, c.scheduler.params, *c.scheduler.type);
    } else {
      sched.field("params", c.scheduler.raw_params);
    }
  }

  print_block(c, out, "fp16", c.fp16);
  print_block(c, out, "bf16", c.bf16);
  print_block(c, out, "torch_autocast", c.torch_autocast);

  const ZeroConfig& z = c.zero_optimization;
  print_block(c, out, "zero_optimization", z);
  Printer zero(c, out, "zero_optimization");
  zero.field("overlap_comm", z.overlap_comm);
  if (z.offload_param) print_block(c, out, "zero_optimization.offload_param", *z.offload_param);
  else zero.add("offload_param", json::make_null());
  if (z.offload_optimizer) print_block(c, out, "zero_optimization.offload_optimizer", *z.offload_optimizer);
  else zero.add("offload_optimizer", json::make_null());

  Printer dt(c, out, "data_types");
  dt.field("grad_accum_dtype", c.data_types.grad_accum_dtype);
  dt.field("param_dtype", c.data_types.param_dtype);
  dt.field("buffer_dtype", c.data_types.buffer_dtype);
  dt.field("keep_in_fp32_modules", c.data_types.keep_in_fp32_modules);

  print_block(c, out, "activation_checkpointing", c.activation_checkpointing);
  print_block(c, out, "flops_profiler", c.flops_profiler);
  print_block(c, out, "trace", c.trace);
  print_block(c, out, "tensorboard", c.tensorboard);
  print_block(c, out, "csv_monitor", c.csv_monitor);
  print_block(c, out, "wandb", c.wandb);
  print_block(c, out, "comet", c.comet);
  if (c.comms_logger) print_block(c, out, "comms_logger", *c.comms_logger);
  else top.add("comms_logger", json::make_null());
  print_block(c, out, "checkpoint", c.checkpoint);
  Printer pw(c, out, "checkpoint.parallel_write");
  pw.field("pipeline_stage", c.checkpoint.parallel_write_pipeline_stage);
  print_block(c, out, "aio", c.aio);
  print_block(c, out, "autotuning", c.autotuning);
  for (const auto& [name, value] : c.other_blocks) top.add(name, value);
  return out;
}

}  // namespace dsx::config
