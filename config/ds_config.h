// EngineConfig: a DeepSpeed ds_config file read, typed, validated and resolved, with DeepSpeed's
// names and meanings (the DeepSpeed release dsx follows is named in docs/config.md). This is
// what the ZeRO engine, the training driver and the estimator read. Every field has its
// effective value: a default where the file is silent, the batch triad solved for the
// data-parallel world size, "auto" replaced as the Hugging Face integration does. Where each
// value came from is in `origins` (for `dsx config check`). Reading is in read_ds_config.cpp;
// the per-block field lists are in fields.h.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/json.h"
#include "config/loss_scaling.h"
#include "config/zero_partitioning.h"
#include "dsx/optimizer_defaults.h"

namespace dsx::config {

// ---- where a value came from ---------------------------------------------------------------
enum class Source {
  Default,  // the file does not set it: DeepSpeed's default
  File,     // written in the file (pos says where)
  Derived,  // computed from other values (the batch triad, overlap_comm for stage 3, ...)
  Auto,     // the file says "auto"; resolved from the command line as Hugging Face does
};
const char* to_string(Source source);

struct Origin {
  Source source = Source::Default;
  json::Position pos;  // for File and Auto: where in the file
  std::string note;    // e.g. "= 4 x 2 x 2", "hidden_size^2", "deprecated cpu_offload"
};

struct Diagnostic {
  std::string path;  // JSON path, e.g. "zero_optimization.offload_optimizer.device"
  json::Position pos;
  std::string message;
};

// ---- blocks ---------------------------------------------------------------------------------
struct OptimizerParams {
  double lr = optimizer_defaults::kLr;  // Adagrad: kAdagradLr and kAdagradEps (read_optimizer.cpp)
  std::vector<double> betas = {optimizer_defaults::kBeta1, optimizer_defaults::kBeta2};
  double eps = optimizer_defaults::kEps;
  double weight_decay = 0.0;
  bool bias_correction = true;
  bool amsgrad = false;
  bool adam_w_mode = true;       // effective: true for AdamW whatever the file says
  bool torch_adam = false;
  bool fp32_optimizer_states = true;  // CPU Adam only
  bool set_grad_none = true;          // FusedAdam only
  // Lamb
  bool eps_inside_sqrt = false;
  double max_coeff = optimizer_defaults::kLambMaxCoeff;
  double min_coeff = optimizer_defaults::kLambMinCoeff;
  // SGD / Adagrad (torch)
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double lr_decay = 0.0;
  double initial_accumulator_value = 0.0;
  bool maximize = false;
};

struct OptimizerConfig {
  std::optional<std::string> type;  // as written; nullopt = no optimizer block / no type
  std::string name;  // DeepSpeed's resolved name: "adam", "adamw", "lamb", "lion", ... or "SGD"
  bool known = false;  // dsx validates the params of this type (adam, adamw, lamb, lion, adagrad, SGD)
  OptimizerParams params;
  json::Value raw_params;  // the params object as written (for types dsx does not check)
  bool legacy_fusion = false;
};

// WarmupDecayLR's warmup_max_lr when the file leaves it out: its own default, not the optimizer's lr.
inline constexpr double kWarmupDecayMaxLr = 0.001;

struct SchedulerParams {
  // WarmupLR, WarmupDecayLR, WarmupCosineLR
  double warmup_min_lr = 0.0;
  std::optional<double> warmup_max_lr;  // WarmupLR: null = the optimizer's lr; WarmupDecayLR: kWarmupDecayMaxLr
  int64_t warmup_num_steps = 1000;
  std::string warmup_type = "log";  // "log" | "linear"
  std::optional<int64_t> total_num_steps;  // required by WarmupDecayLR and WarmupCosineLR
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 0.0001;
  // OneCycle
  std::optional<double> cycle_min_lr, cycle_max_lr;  // required
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  std::optional<int64_t> cycle_second_step_size;  // null = cycle_first_step_size
  int64_t cycle_first_stair_count = 0;
  std::optional<int64_t> cycle_second_stair_count;  // null = cycle_first_stair_count
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  // LRRangeTest
  double lr_range_test_min_lr = 1e-3;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

struct SchedulerConfig {
  std::optional<std::string> type;  // WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest, or torch's
  bool known = false;               // one of DeepSpeed's five (params checked)
  SchedulerParams params;
  json::Value raw_params;
};

struct Fp16Config : Fp16LossScaling {  // the scaler's keys: see there
  bool enabled = false;
  bool auto_cast = false;
  bool fp16_master_weights_and_grads = false;
  bool dynamic() const { return loss_scale == 0; }
};

struct Bf16Config {
  bool enabled = false;
  bool immediate_grad_update = false;
  bool check_grad_overflow = true;
  bool bf16_master_weights_and_grads = false;
  bool bf16_optimizer_states = false;
};

struct TorchAutocastConfig {
  bool enabled = false;
  std::optional<std::string> dtype;
  std::vector<std::string> lower_precision_safe_modules;
};

struct OffloadParamConfig {
  std::string device = "none";  // "none" | "cpu" | "nvme"
  std::optional<std::string> nvme_path;
  int64_t buffer_count = 5;
  int64_t buffer_size = 100'000'000;
  int64_t max_in_cpu = 1'000'000'000;
  bool pin_memory = true;
};

struct OffloadOptimizerConfig {
  std::string device = "none";
  std::optional<std::string> nvme_path;
  int64_t buffer_count = 4;
  bool pin_memory = true;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;
  bool super_offload = false;
  double cpuadam_cores_perc = 0.8;
};

// DeepSpeed's zero_optimization.leaf_module when the file has none: the sparse MoE blocks of
// Mixtral, Qwen2-MoE and Qwen3-MoE are gathered whole at stage 3.
json::Value default_leaf_module();

struct ZeroConfig : ZeroPartitioning {  // stage, buckets, overlap, stage 3 limits: see there
  bool use_multi_rank_bucket_allreduce = true;
  bool allgather_partitions = true;
  bool compute_grad_norm = true;
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  std::optional<OffloadParamConfig> offload_param;          // null = no offload
  std::optional<OffloadOptimizerConfig> offload_optimizer;  // null = no offload
  int64_t sub_group_size = 1'000'000'000;
  bool gather_16bit_weights_on_model_save = false;
  int64_t module_granularity_threshold = 0;
  bool use_all_reduce_for_fetch_params = false;
  bool allgather_sequential = false;
  bool ignore_unused_parameters = true;
  bool legacy_stage1 = false;
  bool round_robin_gradients = false;
  bool parameter_alignment = false;
  int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  bool memory_efficient_linear = true;
  bool pipeline_loading_checkpoint = false;
  bool override_module_apply = true;
  bool log_trace_cache_warnings = false;
  bool enable_sanity_checks = false;
  bool save_muon_momentum_buffer_in_memory = false;
  json::Value zenflow;      // kept as written (null = off)
  json::Value leaf_module = default_leaf_module();  // kept as written

  bool optimizer_offloaded() const { return offload_optimizer && offload_optimizer->device != "none"; }
  bool params_offloaded() const { return offload_param && offload_param->device != "none"; }
};

struct DataTypesConfig {  // canonical spellings: "fp16", "bf16", "fp32", "int8"
  std::optional<std::string> grad_accum_dtype;  // null = the model dtype
  std::optional<std::string> param_dtype;
  std::optional<std::string> buffer_dtype;
  json::Value keep_in_fp32_modules = json::make_string("auto");
};

struct ActivationCheckpointingConfig {
  // dsx: the block is in the config. DeepSpeed leaves checkpointing to the model's code; dsx owns
  // its models, so the block's presence turns recomputation of each layer in backward on.
  bool given = false;
  bool partition_activations = false;
  bool contiguous_memory_optimization = false;
  bool cpu_checkpointing = false;
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

struct FlopsProfilerConfig {
  bool enabled = false;
  double recompute_fwd_factor = 0.0;
  int64_t profile_step = 1;
  int64_t module_depth = -1;
  int64_t top_modules = 1;
  bool detailed = true;
  std::optional<std::string> output_file;
};

struct TensorboardConfig {
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
};
using CsvMonitorConfig = TensorboardConfig;

struct WandbConfig {
  bool enabled = false;
  std::optional<std::string> group, team;
  std::string project = "deepspeed";
};

struct CometConfig {
  bool enabled = false;
  int64_t samples_log_interval = 100;
  std::optional<std::string> project, workspace, api_key, experiment_name, experiment_key, mode;
  std::optional<bool> online;
};

// dsx's own block (DeepSpeed ignores it): per-rank timelines, as `dsx train --profile DIR` and
// --profile_schedule wait,warmup,active,repeat (docs/profiling.md). The flags win over the block.
struct TraceConfig {
  bool enabled = false;
  std::string output_path = "dsx_trace";  // rank<r>.trace.json files go here
  int64_t wait = 1;                       // torch.profiler's schedule, per cycle
  int64_t warmup = 1;
  int64_t active = 3;
  int64_t repeat = 1;  // cycles (0: until the run ends)
};

struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;
  bool prof_all = true;
  bool debug = false;
  std::vector<std::string> prof_ops;
};

struct CheckpointConfig {
  std::string tag_validation = "WARN";  // "IGNORE" | "WARN" | "FAIL" (file: any case)
  bool load_universal = false;
  bool use_node_local_storage = false;
  bool parallel_write_pipeline_stage = false;  // parallel_write.pipeline_stage
  bool checkpoint_serialization = true;
  json::Value writer;  // kept as written
};

struct AioConfig {
  int64_t block_size = 1'048'576;
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;
};

struct AutotuningConfig {
  bool enabled = false;
  bool fast = true;
  std::string results_dir = "autotuning_results";
  std::string exps_dir = "autotuning_exps";
  bool overwrite = true;
  int64_t start_profile_step = 3;
  int64_t end_profile_step = 5;
  std::string metric = "throughput";
  std::optional<std::string> metric_path;
  std::string tuner_type = "gridsearch";
  int64_t tuner_early_stopping = 5;
  int64_t tuner_num_trials = 50;
  std::optional<int64_t> max_train_batch_size;
  int64_t min_train_batch_size = 1;
  int64_t max_train_micro_batch_size_per_gpu = 1024;
  int64_t min_train_micro_batch_size_per_gpu = 1;
  int64_t num_tuning_micro_batch_sizes = 3;
  int64_t mp_size = 1;
  json::Value arg_mappings;                // kept as written (DeepSpeed's autotuner reads them)
  json::Value model_info;                  // kept as written
  std::optional<std::string> model_info_path;
};

// ---- the whole config -----------------------------------------------------------------------
struct EngineConfig {
  // Batch triad, solved (DeepSpeed §2): train_batch_size = micro * accumulation * dp_world_size.
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  int64_t world_size = 1;     // as given (--world-size)
  int64_t dp_world_size = 1;  // world_size / sequence_parallel_size

  bool managed_gradient_accumulation = true;
  std::optional<int64_t> steps_per_print;
  bool wall_clock_breakdown = false;  // effective: also true when flops_profiler.enabled
  bool memory_breakdown = false;
  bool dump_state = false;
  bool disable_python_gc = false;
  double gradient_clipping = 1.0;  // <= 0 disables
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::string gradient_allreduce_op = "mean";  // "mean" | "sum"
  // Effective dtype of gradient communication: the file's value, else fp16/bf16/fp32 by mode.
  std::string communication_data_type = "fp32";
  std::string seq_parallel_communication_data_type = "fp32";
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  bool disable_allgather = false;
  std::optional<int64_t> vocabulary_size;
  bool dataloader_drop_last = false;
  bool use_data_before_expert_parallelism = false;
  std::optional<std::string> log_level;
  std::optional<int64_t> sequence_parallel_size;
  std::optional<int64_t> data_parallel_size;

  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  Fp16Config fp16;
  Bf16Config bf16;
  TorchAutocastConfig torch_autocast;
  ZeroConfig zero_optimization;
  DataTypesConfig data_types;
  ActivationCheckpointingConfig activation_checkpointing;
  FlopsProfilerConfig flops_profiler;
  TraceConfig trace;
  TensorboardConfig tensorboard;
  CsvMonitorConfig csv_monitor;
  WandbConfig wandb;
  CometConfig comet;
  std::optional<CommsLoggerConfig> comms_logger;  // the block's presence switches the logger on
  CheckpointConfig checkpoint;
  AioConfig aio;
  AutotuningConfig autotuning;
  // Blocks DeepSpeed knows that dsx keeps but does not act on (pipeline, data_efficiency,
  // hybrid_engine, tensor_parallel, ...), as written.
  std::map<std::string, json::Value> other_blocks;

  std::map<std::string, Origin> origins;  // dotted path -> where the effective value came from
  std::vector<Diagnostic> warnings;
  // Under an elastic launch, the line that says how the batch was re-cut for this world
  // (config/elastic_batch.h); "" when the config's batch keys fit it as written.
  std::string elastic_batch_change;

  // Convenience for consumers.
  std::string model_dtype() const { return fp16.enabled ? "fp16" : bf16.enabled ? "bf16" : "fp32"; }
  bool zero_enabled() const { return zero_optimization.stage > 0; }
  const Origin& origin(const std::string& path) const;  // Default origin when not recorded
};

// What the command line knows, used to resolve "auto" (the Hugging Face TrainingArguments
// values) and to solve the batch triad.
struct ConfigInputs {
  int64_t world_size = 1;
  std::optional<int64_t> hidden_size;       // --hidden-size
  std::optional<int64_t> micro_batch;       // --micro-batch (per_device_train_batch_size)
  std::optional<int64_t> grad_accum;        // --grad-accum (gradient_accumulation_steps)
  std::optional<double> learning_rate;      // --lr (default 5e-5, as Hugging Face)
  std::optional<int64_t> total_steps;       // --total-steps (num_training_steps)
  std::string total_steps_flag = "--total-steps";  // how the command that reads the file names it
  std::optional<int64_t> warmup_steps;      // --warmup-steps (default 0, as Hugging Face)
  bool strict = false;                      // --strict: every warning is an error
  // An elastic launch (DSX_ELASTIC_BATCH=1 from `dsx torchrun --nnodes MIN:MAX`): keep
  // train_batch_size and recompute the accumulation for this world (config/elastic_batch.h).
  bool keep_train_batch_size = false;
};

// Reads a config file / text. Throws dsx::Error(Config) listing every error found, each with the
// JSON path, line:column, what was expected and what to do; Error(Io) when the file can't be
// read. Warnings are in the result.
EngineConfig read_ds_config_file(const std::string& path, const ConfigInputs& inputs);
EngineConfig read_ds_config_text(std::string_view text, const std::string& source,
                                 const ConfigInputs& inputs);

// Every effective value as (dotted path, JSON text), in a stable order: what `dsx config check`
// prints and what tools/compat compares with DeepSpeed.
struct FlatEntry {
  std::string path;
  std::string value;  // JSON
  Origin origin;
};
std::vector<FlatEntry> flatten(const EngineConfig& config);

}  // namespace dsx::config
