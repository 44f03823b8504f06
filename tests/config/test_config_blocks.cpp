// Each block of the ds_config as dsx reads it: values, defaults, provenance, lax coercions,
// deprecated names, "auto", unknown keys and --strict, and the cross-key rules.
#include "tests/config/config_test_util.h"

using namespace dsx::test;
using dsx::config::Source;

TEST(ConfigBlocks, EveryBlockIsRead) {
  auto c = read_case("every_block");
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_EQ(c.dp_world_size, 2);
  EXPECT_EQ(*c.steps_per_print, 5);
  EXPECT_TRUE(c.wall_clock_breakdown && c.memory_breakdown && c.dump_state);
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 0.5);
  EXPECT_FALSE(c.zero_force_ds_cpu_optimizer);
  EXPECT_EQ(c.optimizer.name, "lamb");
  EXPECT_DOUBLE_EQ(c.optimizer.params.max_coeff, 5.0);
  EXPECT_EQ(c.optimizer.params.betas, (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(*c.scheduler.type, "LRRangeTest");
  EXPECT_EQ(c.scheduler.params.lr_range_test_step_size, 50);
  EXPECT_TRUE(c.scheduler.params.lr_range_test_staircase);
  EXPECT_TRUE(c.bf16.enabled && c.bf16.immediate_grad_update);
  EXPECT_FALSE(c.bf16.check_grad_overflow);
  EXPECT_EQ(c.communication_data_type, "fp32");
  const auto& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 1);
  EXPECT_EQ(z.reduce_bucket_size, 1000);
  EXPECT_TRUE(z.round_robin_gradients);
  EXPECT_EQ(z.offload_optimizer->device, "nvme");
  EXPECT_EQ(*z.offload_optimizer->nvme_path, "/local_nvme");
  EXPECT_EQ(z.offload_optimizer->buffer_count, 8);
  EXPECT_TRUE(z.offload_optimizer->pipeline_read);
  EXPECT_EQ(*c.data_types.grad_accum_dtype, "fp32");
  EXPECT_EQ(*c.activation_checkpointing.number_checkpoints, 4);
  EXPECT_TRUE(c.activation_checkpointing.cpu_checkpointing);
  EXPECT_EQ(c.flops_profiler.module_depth, 2);
  EXPECT_EQ(*c.flops_profiler.output_file, "flops.txt");
  EXPECT_EQ(c.tensorboard.output_path, "tb/");
  EXPECT_EQ(c.csv_monitor.job_name, "run1");
  EXPECT_EQ(*c.wandb.team, "t");
  EXPECT_EQ(c.comet.samples_log_interval, 10);
  EXPECT_EQ(*c.comet.online, false);
  ASSERT_TRUE(c.comms_logger.has_value());
  EXPECT_EQ(c.comms_logger->prof_ops, (std::vector<std::string>{"all_reduce"}));
  EXPECT_EQ(c.checkpoint.tag_validation, "IGNORE");
  EXPECT_TRUE(c.checkpoint.parallel_write_pipeline_stage);
  EXPECT_EQ(c.aio.queue_depth, 16);
  EXPECT_EQ(c.autotuning.tuner_type, "random");
  ASSERT_EQ(c.other_blocks.count("pipeline"), 1u);
  EXPECT_EQ(c.other_blocks.at("pipeline").find("partition")->text, "parameters");
  EXPECT_EQ(c.origin("aio.queue_depth").source, Source::File);
  EXPECT_EQ(c.origin("aio.use_gds").source, Source::Default);
}

TEST(ConfigBlocks, DefaultsMatchDeepSpeed) {
  auto c = read_text(R"({"train_batch_size": 1, "optimizer": {"type": "AdamW"}})");
  EXPECT_FALSE(c.steps_per_print.has_value());
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.gradient_allreduce_op, "mean");
  EXPECT_EQ(c.communication_data_type, "fp32");
  EXPECT_EQ(c.zero_optimization.stage, 0);
  EXPECT_FALSE(c.zero_optimization.overlap_comm);
  EXPECT_FALSE(c.zero_optimization.offload_optimizer.has_value());
  EXPECT_EQ(c.zero_optimization.model_persistence_threshold, INT64_MAX);
  EXPECT_DOUBLE_EQ(c.optimizer.params.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.params.eps, 1e-8);
  EXPECT_TRUE(c.bf16.check_grad_overflow);
  EXPECT_EQ(c.checkpoint.tag_validation, "WARN");
  EXPECT_EQ(c.aio.block_size, 1048576);
  EXPECT_TRUE(c.autotuning.overwrite);
  EXPECT_EQ(c.autotuning.tuner_type, "gridsearch");
  EXPECT_FALSE(c.comms_logger.has_value());
  EXPECT_EQ(c.tensorboard.job_name, "DeepSpeedJobName");
  EXPECT_EQ(c.wandb.project, "deepspeed");
}

TEST(ConfigBlocks, LaxCoercionsInStrictBlocks) {
  auto c = read_case("lax_coercion");
  const auto& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 2);                  // "2"
  EXPECT_EQ(z.reduce_bucket_size, 500);   // "500"
  EXPECT_EQ(z.allgather_bucket_size, 500000000);  // 5e8
  EXPECT_TRUE(z.overlap_comm);            // "yes"
  EXPECT_FALSE(z.contiguous_gradients);   // 0
  EXPECT_TRUE(z.reduce_scatter);          // "on"
  EXPECT_TRUE(c.fp16.enabled);            // 1
  EXPECT_EQ(c.fp16.hysteresis, 4);        // 4.0
  EXPECT_EQ(read_case("stage_true").zero_optimization.stage, 1);
}

TEST(ConfigBlocks, TypeAndRangeErrorsSayWhatToWrite) {
  EXPECT_CONTAINS(case_error("stage_4"), "zero_optimization.stage: must be at most 3, got 4");
  EXPECT_CONTAINS(case_error("stage_2_5"), "expected a whole number, got 2.5");
  EXPECT_CONTAINS(case_error("bool_2"), "expected true or false, got 2. Write true or false.");
  EXPECT_CONTAINS(case_error("int_string_5e8"), "got the string \"5e8\"");
  EXPECT_CONTAINS(case_error("int_1e30"), "too large");
  EXPECT_CONTAINS(case_error("ratio_above_1"), "ratio: must be at most 1, got 1.5");
  auto e = text_error(R"({"train_batch_size": 8, "fp16": {"enabled": "maybe"}})");
  EXPECT_CONTAINS(e, "test.json:1:45: fp16.enabled: expected true or false");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "zero_optimization": [1]})"),
                  "zero_optimization: expected an object");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "optimizer": {"type": 3}})"), "optimizer.type: expected a string");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"betas": [0.9, 2]}}})"),
                  "optimizer.params.betas: item 1: must be at most 1");
  // Adam's and Lamb's (beta1, beta2), Lion's too: one value is not a pair (DeepSpeed fails unpacking it).
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})"),
                  "optimizer.params.betas: expected 2 values (beta1, beta2), got 1");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "optimizer": {"type": "Lion", "params": {"betas": [0.9, 0.99, 0.9]}}})"),
                  "optimizer.params.betas: expected 2 values (beta1, beta2), got 3");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "zero_optimization": {"reduce_bucket_size": 0}})"),
                  "must be greater than 0");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 99999999999999999999})"), "too large");
}

TEST(ConfigBlocks, AllErrorsOfAFileAreReportedTogether) {
  auto e = text_error(R"({"train_batch_size": 8, "fp16": {"enabled": 3}, "zero_optimization": {"stage": 7}})");
  EXPECT_CONTAINS(e, "2 problems in test.json");
  EXPECT_CONTAINS(e, "fp16.enabled");
  EXPECT_CONTAINS(e, "zero_optimization.stage");
}

TEST(ConfigBlocks, DeprecatedNamesAreMappedWithWarnings) {
  auto p = read_case("cpu_offload_param");
  EXPECT_EQ(p.zero_optimization.offload_param->device, "cpu");
  EXPECT_EQ(p.zero_optimization.offload_param->buffer_count, 5);
  EXPECT_TRUE(has_warning(p, "cpu_offload_param is deprecated"));
  auto g = read_case("gather_fp16_deprecated");
  EXPECT_TRUE(g.zero_optimization.gather_16bit_weights_on_model_save);
  EXPECT_TRUE(has_warning(g, "stage3_gather_fp16_weights_on_model_save is deprecated"));
  EXPECT_CONTAINS(case_error("gather_both"), "Cannot provide deprecated parameter 'stage3_gather_fp16_weights_on_model_save'");
  EXPECT_CONTAINS(case_error("short_and_long_alias"), "both 'prefetch_bucket_size' and its other name");
  auto f = read_case("zero_false");
  EXPECT_EQ(f.zero_optimization.stage, 0);
  EXPECT_TRUE(has_warning(f, "is deprecated"));
  EXPECT_EQ(read_case("zero_true_allgather_size").zero_optimization.allgather_bucket_size, 1000);
  auto a = read_case("aio_thread_count");
  EXPECT_EQ(a.aio.intra_op_parallelism, 1);  // ignored, as in DeepSpeed
  EXPECT_TRUE(has_warning(a, "intra_op_parallelism"));
  auto s = read_text(R"({"train_batch_size": 8, "seq_parallel_comm_data_type": "bf16", "optimizer": {"type": "AdamW"}})");
  EXPECT_EQ(s.seq_parallel_communication_data_type, "fp32");
  EXPECT_TRUE(has_warning(s, "seq_parallel_communication_data_type"));
  auto b = read_text(R"({"train_batch_size": 8, "bf16": {"enabled": true}, "bfloat16": {"enabled": false}, "optimizer": {"type": "AdamW"}})");
  EXPECT_TRUE(b.bf16.enabled);
  EXPECT_TRUE(has_warning(b, "\"bfloat16\" is ignored because \"bf16\" is given"));
}

TEST(ConfigBlocks, UnknownKeysGetTheClosestValidKey) {
  auto c = read_case("typo_top_level");
  EXPECT_TRUE(has_warning(c, "Did you mean 'gradient_clipping'?"));
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);  // the misspelt key is ignored, as in DeepSpeed
  EXPECT_CONTAINS(case_error("typo_zero"), "Did you mean 'overlap_comm'?");
  auto a = read_text(R"({"train_batch_size": 8, "activation_checkpointing": {"partition_activation": true}, "optimizer": {"type": "AdamW"}})");
  EXPECT_TRUE(has_warning(a, "Did you mean 'partition_activations'?"));
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"learning_rate": 1}}})"),
                  "optimizer.params.learning_rate");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "scheduler": {"type": "WarmupLr", "params": {}}})"),
                  "Did you mean 'WarmupLR'?");
}

TEST(ConfigBlocks, StrictTurnsWarningsIntoErrors) {
  dsx::config::ConfigInputs in;
  in.strict = true;
  auto e = error_of([&] { dsx::config::read_ds_config_file(case_path("typo_top_level"), in); });
  EXPECT_CONTAINS(e, "gradient_clippping");
  EXPECT_CONTAINS(e, "(an error with --strict)");
  EXPECT_NO_THROW(dsx::config::read_ds_config_file(case_path("s8_19_no_clipping"), in));
}

TEST(ConfigBlocks, AutoResolvesAsHuggingFace) {
  auto c = read_case("hf_auto_stage3");
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 2);
  EXPECT_EQ(c.gradient_accumulation_steps, 8);
  EXPECT_EQ(c.train_batch_size, 64);  // 4 ranks
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 4096LL * 4096);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 15099494);  // int(0.9 * 4096^2)
  EXPECT_EQ(c.zero_optimization.param_persistence_threshold, 40960);
  EXPECT_DOUBLE_EQ(c.optimizer.params.lr, 5e-5);
  EXPECT_DOUBLE_EQ(*c.scheduler.params.warmup_max_lr, 5e-5);
  EXPECT_EQ(c.scheduler.params.warmup_num_steps, 10);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_DOUBLE_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.origin("zero_optimization.reduce_bucket_size").source, Source::Auto);
  EXPECT_CONTAINS(c.origin("zero_optimization.reduce_bucket_size").note, "hidden_size^2");
}

TEST(ConfigBlocks, UnresolvableAutoNamesTheFlag) {
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}}})"),
                  "needs --total-steps");
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "steps_per_print": "auto"})"), "Write a value");
  // At stage 2 the stage-3 keys stay DeepSpeed's defaults even with a hidden size.
  dsx::config::ConfigInputs in;
  in.hidden_size = 1024;
  auto c = dsx::config::read_ds_config_text(
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}})",
      "t.json", in);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 1024 * 1024);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 50000000);
}

TEST(ConfigBlocks, CrossKeyRules) {
  EXPECT_CONTAINS(case_error("rule_onebit_zero"), "OneBitAdam is not a supported DeepSpeed Optimizer");
  EXPECT_CONTAINS(case_error("rule_onebit_zero"), "DeepSpeed removed 1-bit Adam");
  EXPECT_CONTAINS(case_error("rule_lamb_static_scale"), "requires dynamic loss scaling");
  EXPECT_CONTAINS(case_error("rule_predivide_stage2"), "gradient_predivide_factor must be 1.0");
  EXPECT_CONTAINS(case_error("rule_sum_stage3"), "\"sum\" is not supported with ZeRO stage 3");
  EXPECT_CONTAINS(case_error("rule_legacy_stage1"), "legacy_stage1");
  EXPECT_CONTAINS(case_error("rule_param_dtype"), "they must agree");
  EXPECT_CONTAINS(case_error("rule_unknown_dtype"), "unknown dtype");
  EXPECT_CONTAINS(case_error("rule_nvme_without_path"), "needs nvme_path");
  EXPECT_CONTAINS(case_error("rule_amsgrad_fused"), "amsgrad");
  EXPECT_CONTAINS(case_error("rule_onecycle_missing"), "needs \"cycle_min_lr\"");
  EXPECT_CONTAINS(case_error("rule_scheduler_no_params"), "has no \"params\"");
  EXPECT_CONTAINS(case_error("rule_unknown_optimizer_param"), "optimizer.params.learning_rate");
  EXPECT_CONTAINS(case_error("rule_scheduler_typo"), "Did you mean 'WarmupLR'?");
  auto warn = read_case("offload_param_stage2");
  EXPECT_TRUE(has_warning(warn, "offload_param is used by ZeRO stage 3 only"));
}

TEST(ConfigBlocks, DerivedValuesCarryTheirReason) {
  auto c = read_text(R"({"train_batch_size": 8, "flops_profiler": {"enabled": true}, "bf16": {"enabled": true},
                         "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "adam_w_mode": false}},
                         "scheduler": {"type": "WarmupLR", "params": {}}})");
  EXPECT_TRUE(c.wall_clock_breakdown);
  EXPECT_EQ(c.origin("wall_clock_breakdown").source, Source::Derived);
  EXPECT_EQ(c.communication_data_type, "bf16");
  EXPECT_DOUBLE_EQ(*c.scheduler.params.warmup_max_lr, 0.002);  // null = the optimizer's lr
  EXPECT_TRUE(c.optimizer.params.adam_w_mode);                 // AdamW ignores adam_w_mode: false
  EXPECT_TRUE(has_warning(c, "adam_w_mode: false is ignored for type AdamW"));
  EXPECT_EQ(value_at(c, "optimizer.params.lr"), "0.002");
  EXPECT_EQ(value_at(c, "zero_optimization.offload_optimizer"), "null");
}

TEST(ConfigBlocks, RemovedFeaturesAreRefusedAsInDeepSpeed) {
  auto e = case_error("rule_removed_keys");
  EXPECT_CONTAINS(e, "3 problems");
  EXPECT_CONTAINS(e, "'elasticity' is no longer supported by DeepSpeed (elastic training was removed");
  EXPECT_CONTAINS(e, "recomputes gradient_accumulation_steps for each world size");
  EXPECT_CONTAINS(e, "'sparse_gradients' is no longer supported");
  EXPECT_CONTAINS(e, "zero_optimization.mics_shard_size: 'mics_shard_size' is no longer supported");
}

TEST(ConfigBlocks, CommentsAndTrailingCommasInAFile) {
  auto c = read_case("comments_trailing_commas");
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 50000000);
  EXPECT_EQ(c.optimizer.params.betas, (std::vector<double>{0.9, 0.95}));
  EXPECT_EQ(c.origin("zero_optimization.stage").pos.line, 8);
}

TEST(ConfigBlocks, MissingFileIsAnIoError) {
  auto e = error_of([] { dsx::config::read_ds_config_file("/nonexistent/ds.json", {}); }, dsx::ErrorKind::Io);
  EXPECT_CONTAINS(e, "cannot open");
}

TEST(ConfigBlocks, RawValuesKeepAuto) {
  auto c = read_text(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW"}, "data_types": {"keep_in_fp32_modules": "auto"},
                         "pipeline": {"stages": "auto"}})");
  EXPECT_TRUE(c.data_types.keep_in_fp32_modules.is_string("auto"));
  EXPECT_TRUE(c.other_blocks.at("pipeline").find("stages")->is_string("auto"));
  EXPECT_CONTAINS(text_error(R"({"train_batch_size": 8, "data_types": {"keep_in_fp32_modules": 3}})"),
                  "must be \"auto\" or a list");
}

TEST(ConfigBlocks, HugeUnknownKeysAreShortenedAndCheap) {
  std::string key(200000, 'k');
  auto c = read_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\"}, \"" + key + "\": 1}");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_LT(c.warnings[0].message.size(), 300u);
}

// Keys DeepSpeed 0.19.8 reads in the autotuning block are known keys, not typos: no warning,
// and --strict accepts the file.
TEST(ConfigBlocks, AutotuningKeysDeepSpeedReadsAreKnown) {
  const std::string text = R"({"train_batch_size": 8, "optimizer": {"type": "AdamW"},
    "autotuning": {"enabled": false, "arg_mappings": {"train_micro_batch_size_per_gpu": "--per_device_train_batch_size"},
                   "model_info": {"num_params": 1000}, "model_info_path": "model_info.json"}})";
  auto c = read_text(text);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front().path << ": " << c.warnings.front().message;
  EXPECT_EQ(c.autotuning.model_info_path, "model_info.json");
  EXPECT_CONTAINS(value_at(c, "autotuning.arg_mappings"), "--per_device_train_batch_size");
}

// leaf_module's default is DeepSpeed's: the three sparse MoE block classes.
TEST(ConfigBlocks, LeafModuleDefaultsToDeepSpeedsMoeBlocks) {
  auto c = read_text(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 3}})");
  const std::string v = value_at(c, "zero_optimization.leaf_module");
  EXPECT_CONTAINS(v, "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock");
  EXPECT_CONTAINS(v, "Qwen2MoeSparseMoeBlock");
  EXPECT_CONTAINS(v, "Qwen3MoeSparseMoeBlock");
}

// A UTF-8 byte order mark (as some Windows editors save files) is read past, as Python's json
// does with utf-8-sig; positions of errors after it stay right.
TEST(ConfigBlocks, AByteOrderMarkIsReadPast) {
  auto c = read_text("\xEF\xBB\xBF{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\"}}");
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_CONTAINS(text_error("\xEF\xBB\xBF{\"train_batch_size\": 8,\n \"fp16\": 3}"), ":2:");
}
