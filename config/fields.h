// The field list of every ds_config block, written once and walked by two visitors: the reader
// (BlockReader: JSON -> typed fields) and the printer (flatten.cpp: typed fields -> dotted
// listing). A visitor has `field(key, member, Spec)`. Keys, aliases and ranges follow DeepSpeed
// (see docs/config.md for the release); defaults live in the structs of ds_config.h. Fields
// that need more than a conversion (the batch triad, overlap_comm, communication_data_type,
// deprecated names, nested blocks) are handled in read_ds_config.cpp and flatten.cpp.
#pragma once

#include "config/ds_config.h"
#include "config/field_reader.h"

namespace dsx::config::detail {

inline Spec at_least(double min) {
  Spec s;
  s.min = min;
  return s;
}
inline Spec greater_than(double min) {
  Spec s = at_least(min);
  s.min_exclusive = true;
  return s;
}
inline Spec between(double min, double max) {
  Spec s = at_least(min);
  s.max = max;
  return s;
}
// A list of two values in [min, max]: DeepSpeed's optimizers unpack it into two names, so any
// other length fails there (a ValueError at the first step).
inline Spec pair_between(double min, double max, const char* named) {
  Spec s = between(min, max);
  s.items = 2;
  s.items_named = named;
  return s;
}
// A field DeepSpeed also accepts under another name (populate-by-name).
inline Spec also_named(const char* name) {
  Spec s;
  s.alias = name;
  return s;
}
inline Spec alias(const char* name) {  // a non-negative integer with another name
  Spec s = at_least(0);
  s.alias = name;
  return s;
}
inline Spec one_of(std::vector<std::string> choices, bool ignore_case = false) {
  Spec s;
  s.choices = std::move(choices);
  s.ignore_case = ignore_case;
  return s;
}
inline const std::vector<std::string>& comm_dtypes() {
  static const std::vector<std::string> k = {"fp32", "fp16", "bf16"};
  return k;
}

// Top-level scalars (not the triad, not communication_data_type: see read_ds_config.cpp).
template <class V>
void visit_top(V& v, EngineConfig& c) {
  v.field("managed_gradient_accumulation", c.managed_gradient_accumulation);
  v.field("steps_per_print", c.steps_per_print, at_least(1));
  v.field("wall_clock_breakdown", c.wall_clock_breakdown);
  v.field("memory_breakdown", c.memory_breakdown);
  v.field("dump_state", c.dump_state);
  v.field("disable_python_gc", c.disable_python_gc);
  v.field("gradient_clipping", c.gradient_clipping);
  v.field("prescale_gradients", c.prescale_gradients);
  v.field("gradient_predivide_factor", c.gradient_predivide_factor, greater_than(0));
  v.field("gradient_allreduce_op", c.gradient_allreduce_op, one_of({"mean", "sum"}, true));
  v.field("seq_parallel_communication_data_type", c.seq_parallel_communication_data_type,
          one_of(comm_dtypes(), true));
  v.field("zero_allow_untested_optimizer", c.zero_allow_untested_optimizer);
  v.field("zero_force_ds_cpu_optimizer", c.zero_force_ds_cpu_optimizer);
  v.field("disable_allgather", c.disable_allgather);
  v.field("vocabulary_size", c.vocabulary_size, at_least(1));
  v.field("dataloader_drop_last", c.dataloader_drop_last);
  v.field("use_data_before_expert_parallelism", c.use_data_before_expert_parallelism);
  v.field("log_level", c.log_level);
  v.field("sequence_parallel_size", c.sequence_parallel_size, at_least(1));
  v.field("data_parallel_size", c.data_parallel_size, at_least(1));
}

template <class V>
void visit(V& v, Fp16Config& c) {
  v.field("enabled", c.enabled);
  v.field("auto_cast", c.auto_cast);
  v.field("loss_scale", c.loss_scale, at_least(0));
  v.field("initial_scale_power", c.initial_scale_power);
  v.field("loss_scale_window", c.loss_scale_window);
  v.field("hysteresis", c.hysteresis);
  v.field("consecutive_hysteresis", c.consecutive_hysteresis);
  v.field("min_loss_scale", c.min_loss_scale);
  v.field("fp16_master_weights_and_grads", c.fp16_master_weights_and_grads);
}

template <class V>
void visit(V& v, Bf16Config& c) {
  v.field("enabled", c.enabled);
  v.field("immediate_grad_update", c.immediate_grad_update);
  v.field("check_grad_overflow", c.check_grad_overflow);
  v.field("bf16_master_weights_and_grads", c.bf16_master_weights_and_grads);
  v.field("bf16_optimizer_states", c.bf16_optimizer_states);
}

inline Spec offload_devices() { return one_of({"none", "cpu", "nvme"}); }

template <class V>
void visit(V& v, OffloadParamConfig& c) {
  v.field("device", c.device, offload_devices());
  v.field("nvme_path", c.nvme_path);
  v.field("buffer_count", c.buffer_count, at_least(0));
  v.field("buffer_size", c.buffer_size, at_least(0));
  v.field("max_in_cpu", c.max_in_cpu, at_least(0));
  v.field("pin_memory", c.pin_memory);
}

template <class V>
void visit(V& v, OffloadOptimizerConfig& c) {
  v.field("device", c.device, offload_devices());
  v.field("nvme_path", c.nvme_path);
  v.field("buffer_count", c.buffer_count, at_least(0));
  v.field("pin_memory", c.pin_memory);
  v.field("pipeline_read", c.pipeline_read);
  v.field("pipeline_write", c.pipeline_write);
  v.field("fast_init", c.fast_init);
  v.field("ratio", c.ratio, between(0, 1));
  v.field("super_offload", c.super_offload);
  v.field("cpuadam_cores_perc", c.cpuadam_cores_perc, between(0, 1));
}

// zero_optimization without stage's neighbours handled by hand: overlap_comm, the offload
// blocks and the deprecated keys.
template <class V>
void visit(V& v, ZeroConfig& c) {
  v.field("stage", c.stage, between(0, 3));
  v.field("contiguous_gradients", c.contiguous_gradients);
  v.field("reduce_scatter", c.reduce_scatter);
  v.field("reduce_bucket_size", c.reduce_bucket_size, greater_than(0));
  v.field("use_multi_rank_bucket_allreduce", c.use_multi_rank_bucket_allreduce);
  v.field("allgather_partitions", c.allgather_partitions);
  v.field("allgather_bucket_size", c.allgather_bucket_size, at_least(0));
  v.field("compute_grad_norm", c.compute_grad_norm);
  v.field("load_from_fp32_weights", c.load_from_fp32_weights);
  v.field("elastic_checkpoint", c.elastic_checkpoint);
  v.field("sub_group_size", c.sub_group_size, at_least(0));
  v.field("prefetch_bucket_size", c.prefetch_bucket_size, alias("stage3_prefetch_bucket_size"));
  v.field("param_persistence_threshold", c.param_persistence_threshold,
          alias("stage3_param_persistence_threshold"));
  v.field("model_persistence_threshold", c.model_persistence_threshold,
          alias("stage3_model_persistence_threshold"));
  v.field("max_live_parameters", c.max_live_parameters, alias("stage3_max_live_parameters"));
  v.field("max_reuse_distance", c.max_reuse_distance, alias("stage3_max_reuse_distance"));
  v.field("gather_16bit_weights_on_model_save", c.gather_16bit_weights_on_model_save,
          also_named("stage3_gather_16bit_weights_on_model_save"));
  v.field("module_granularity_threshold", c.module_granularity_threshold,
          also_named("stage3_module_granularity_threshold"));
  v.field("use_all_reduce_for_fetch_params", c.use_all_reduce_for_fetch_params,
          also_named("stage3_use_all_reduce_for_fetch_params"));
  v.field("allgather_sequential", c.allgather_sequential, also_named("stage3_allgather_sequential"));
  v.field("ignore_unused_parameters", c.ignore_unused_parameters);
  v.field("legacy_stage1", c.legacy_stage1);
  v.field("round_robin_gradients", c.round_robin_gradients);
  v.field("parameter_alignment", c.parameter_alignment);
  v.field("zero_hpz_partition_size", c.zero_hpz_partition_size, at_least(0));
  v.field("zero_quantized_weights", c.zero_quantized_weights);
  v.field("zero_quantized_nontrainable_weights", c.zero_quantized_nontrainable_weights);
  v.field("zero_quantized_gradients", c.zero_quantized_gradients);
  v.field("memory_efficient_linear", c.memory_efficient_linear);
  v.field("pipeline_loading_checkpoint", c.pipeline_loading_checkpoint);
  v.field("override_module_apply", c.override_module_apply);
  v.field("log_trace_cache_warnings", c.log_trace_cache_warnings);
  v.field("enable_sanity_checks", c.enable_sanity_checks);
  v.field("save_muon_momentum_buffer_in_memory", c.save_muon_momentum_buffer_in_memory);
  v.field("zenflow", c.zenflow);
  v.field("leaf_module", c.leaf_module);
}

template <class V>
void visit(V& v, ActivationCheckpointingConfig& c) {
  v.field("partition_activations", c.partition_activations);
  v.field("contiguous_memory_optimization", c.contiguous_memory_optimization);
  v.field("cpu_checkpointing", c.cpu_checkpointing);
  v.field("number_checkpoints", c.number_checkpoints, at_least(1));
  v.field("synchronize_checkpoint_boundary", c.synchronize_checkpoint_boundary);
  v.field("profile", c.profile);
}

template <class V>
void visit(V& v, FlopsProfilerConfig& c) {
  v.field("enabled", c.enabled);
  v.field("recompute_fwd_factor", c.recompute_fwd_factor, at_least(0));
  v.field("profile_step", c.profile_step, at_least(1));
  v.field("module_depth", c.module_depth);
  v.field("top_modules", c.top_modules, at_least(1));
  v.field("detailed", c.detailed);
  v.field("output_file", c.output_file);
}

template <class V>
void visit(V& v, TensorboardConfig& c) {
  v.field("enabled", c.enabled);
  v.field("output_path", c.output_path);
  v.field("job_name", c.job_name);
}

template <class V>
void visit(V& v, WandbConfig& c) {
  v.field("enabled", c.enabled);
  v.field("group", c.group);
  v.field("team", c.team);
  v.field("project", c.project);
}

template <class V>
void visit(V& v, CometConfig& c) {
  v.field("enabled", c.enabled);
  v.field("samples_log_interval", c.samples_log_interval, greater_than(0));
  v.field("project", c.project);
  v.field("workspace", c.workspace);
  v.field("api_key", c.api_key);
  v.field("experiment_name", c.experiment_name);
  v.field("experiment_key", c.experiment_key);
  v.field("online", c.online);
  v.field("mode", c.mode);
}

template <class V>
void visit(V& v, TraceConfig& c) {
  v.field("enabled", c.enabled);
  v.field("output_path", c.output_path);
  v.field("wait", c.wait, between(0, 1000000));
  v.field("warmup", c.warmup, between(0, 1000000));
  v.field("active", c.active, between(1, 1000000));
  v.field("repeat", c.repeat, between(0, 1000000));
}

template <class V>
void visit(V& v, CommsLoggerConfig& c) {
  v.field("enabled", c.enabled);
  v.field("verbose", c.verbose);
  v.field("prof_all", c.prof_all);
  v.field("debug", c.debug);
  v.field("prof_ops", c.prof_ops);
}

template <class V>
void visit(V& v, CheckpointConfig& c) {
  v.field("tag_validation", c.tag_validation, one_of({"IGNORE", "WARN", "FAIL"}, true));
  v.field("load_universal", c.load_universal);
  v.field("use_node_local_storage", c.use_node_local_storage);
  v.field("checkpoint_serialization", c.checkpoint_serialization);
  v.field("writer", c.writer);
}

template <class V>
void visit(V& v, AioConfig& c) {
  v.field("block_size", c.block_size, greater_than(0));
  v.field("queue_depth", c.queue_depth, greater_than(0));
  v.field("intra_op_parallelism", c.intra_op_parallelism, greater_than(0));
  v.field("single_submit", c.single_submit);
  v.field("overlap_events", c.overlap_events);
  v.field("use_gds", c.use_gds);
}

template <class V>
void visit(V& v, AutotuningConfig& c) {
  v.field("enabled", c.enabled);
  v.field("fast", c.fast);
  v.field("results_dir", c.results_dir);
  v.field("exps_dir", c.exps_dir);
  v.field("overwrite", c.overwrite);
  v.field("start_profile_step", c.start_profile_step, at_least(0));
  v.field("end_profile_step", c.end_profile_step, at_least(0));
  v.field("metric", c.metric, one_of({"latency", "throughput", "flops"}));
  v.field("metric_path", c.metric_path);
  v.field("tuner_type", c.tuner_type, one_of({"gridsearch", "random", "model_based"}));
  v.field("tuner_early_stopping", c.tuner_early_stopping, at_least(0));
  v.field("tuner_num_trials", c.tuner_num_trials, at_least(1));
  v.field("max_train_batch_size", c.max_train_batch_size, at_least(1));
  v.field("min_train_batch_size", c.min_train_batch_size, at_least(1));
  v.field("max_train_micro_batch_size_per_gpu", c.max_train_micro_batch_size_per_gpu, at_least(1));
  v.field("min_train_micro_batch_size_per_gpu", c.min_train_micro_batch_size_per_gpu, at_least(1));
  v.field("num_tuning_micro_batch_sizes", c.num_tuning_micro_batch_sizes, at_least(1));
  v.field("mp_size", c.mp_size, at_least(1));
  v.field("arg_mappings", c.arg_mappings);
  v.field("model_info", c.model_info);
  v.field("model_info_path", c.model_info_path);
}

template <class V>
void visit(V& v, TorchAutocastConfig& c) {
  v.field("enabled", c.enabled);
  v.field("dtype", c.dtype);
  v.field("lower_precision_safe_modules", c.lower_precision_safe_modules);
}

// optimizer.params: the keys each optimizer's constructor takes (DeepSpeed passes params as
// keyword arguments, so any other key is a TypeError there). `name` is DeepSpeed's resolved name.
template <class V>
void visit_optimizer_params(V& v, OptimizerParams& p, const std::string& name) {
  const bool adam = name == "adam" || name == "adamw";
  v.field("lr", p.lr, at_least(0));
  if (name == "SGD") {
    v.field("momentum", p.momentum, at_least(0));
    v.field("dampening", p.dampening);
    v.field("weight_decay", p.weight_decay, at_least(0));
    v.field("nesterov", p.nesterov);
    v.field("maximize", p.maximize);
    return;
  }
  if (name == "adagrad") {
    v.field("lr_decay", p.lr_decay, at_least(0));
    v.field("weight_decay", p.weight_decay, at_least(0));
    v.field("initial_accumulator_value", p.initial_accumulator_value, at_least(0));
    v.field("eps", p.eps, at_least(0));
    v.field("maximize", p.maximize);
    return;
  }
  v.field("betas", p.betas, pair_between(0, 1, "(beta1, beta2)"));
  v.field("weight_decay", p.weight_decay, at_least(0));
  if (name == "lion") return;
  v.field("eps", p.eps, at_least(0));
  v.field("bias_correction", p.bias_correction);
  v.field("amsgrad", p.amsgrad);
  if (adam) {
    v.field("adam_w_mode", p.adam_w_mode);
    v.field("torch_adam", p.torch_adam);
    v.field("fp32_optimizer_states", p.fp32_optimizer_states);
    v.field("set_grad_none", p.set_grad_none);
  } else {  // lamb
    v.field("eps_inside_sqrt", p.eps_inside_sqrt);
    v.field("max_coeff", p.max_coeff, at_least(0));
    v.field("min_coeff", p.min_coeff, at_least(0));
  }
}

// scheduler.params per DeepSpeed schedule (type names are case-sensitive, as in DeepSpeed).
template <class V>
void visit_scheduler_params(V& v, SchedulerParams& p, const std::string& type) {
  static const std::vector<std::string> kWarmupTypes = {"log", "linear"};
  if (type == "WarmupLR" || type == "WarmupDecayLR") {
    v.field("warmup_min_lr", p.warmup_min_lr);
    v.field("warmup_max_lr", p.warmup_max_lr);
    v.field("warmup_num_steps", p.warmup_num_steps, greater_than(0));
    v.field("warmup_type", p.warmup_type, one_of(kWarmupTypes));
    if (type == "WarmupDecayLR") v.field("total_num_steps", p.total_num_steps, greater_than(0));
  } else if (type == "WarmupCosineLR") {
    v.field("total_num_steps", p.total_num_steps, greater_than(0));
    v.field("warmup_min_ratio", p.warmup_min_ratio, between(0, 1));
    v.field("warmup_num_steps", p.warmup_num_steps, greater_than(0));
    v.field("cos_min_ratio", p.cos_min_ratio, between(0, 1));
    v.field("warmup_type", p.warmup_type, one_of(kWarmupTypes));
  } else if (type == "OneCycle") {
    v.field("cycle_min_lr", p.cycle_min_lr);
    v.field("cycle_max_lr", p.cycle_max_lr);
    v.field("decay_lr_rate", p.decay_lr_rate);
    v.field("cycle_first_step_size", p.cycle_first_step_size, greater_than(0));
    v.field("cycle_second_step_size", p.cycle_second_step_size, at_least(0));
    v.field("cycle_first_stair_count", p.cycle_first_stair_count, at_least(0));
    v.field("cycle_second_stair_count", p.cycle_second_stair_count, at_least(0));
    v.field("decay_step_size", p.decay_step_size, at_least(0));
    v.field("cycle_momentum", p.cycle_momentum);
    v.field("cycle_min_mom", p.cycle_min_mom);
    v.field("cycle_max_mom", p.cycle_max_mom);
    v.field("decay_mom_rate", p.decay_mom_rate);
  } else if (type == "LRRangeTest") {
    v.field("lr_range_test_min_lr", p.lr_range_test_min_lr);
    v.field("lr_range_test_step_size", p.lr_range_test_step_size, greater_than(0));
    v.field("lr_range_test_step_rate", p.lr_range_test_step_rate);
    v.field("lr_range_test_staircase", p.lr_range_test_staircase);
  }
}

}  // namespace dsx::config::detail
