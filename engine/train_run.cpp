// `dsx train` on one rank (see train_run.h): set-up in the order the pieces depend on each other,
// then a loop that trains a step and tells the observers (engine/observers/), then the end of the
// run - the last evaluation, the final save, the weights and the summary.
#include "engine/train_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "comm/logging_communicator.h"
#include "comm/session.h"
#include "device/cuda_device.h"
#include "dsx/error.h"
#include "engine/addition_samples.h"
#include "engine/arrangement.h"
#include "engine/device_flag.h"
#include "engine/device_partitioned_frozen_weights.h"
#include "engine/flops_profiler.h"
#include "engine/monitor/monitor_master.h"
#include "engine/observers/divergence_guard.h"
#include "engine/observers/flops_profile_writer.h"
#include "engine/observers/monitor_writer.h"
#include "engine/observers/periodic_action.h"
#include "engine/observers/profile_window.h"
#include "engine/observers/progress_beat.h"
#include "engine/observers/progress_updater.h"
#include "engine/observers/run_totals.h"
#include "engine/observers/step_log_printer.h"
#include "engine/observers/throughput_printer.h"
#include "engine/observers/trace_window.h"
#include "engine/progress/progress_display.h"
#include "engine/rank_environment.h"
#include "engine/resource_rows.h"
#include "engine/run_description.h"
#include "engine/train_checkpoint.h"
#include "engine/trainer.h"
#include "engine/training_data.h"
#include "engine/trial_metrics.h"
#include "engine/writable_directory.h"
#include "kernels/device_choice.h"
#include "models/gpt2/factory.h"
#include "engine/partitioned_frozen_weights.h"
#include "engine/partitioned_nf4_frozen_weights.h"
#include "models/lora/lora_factory.h"
#include "models/lora/peft_adapter.h"
#include "models/lora/nf4_frozen_weights.h"
#include "models/lora/qlora_factory.h"
#include "models/model_source.h"
#include "models/sampling.h"

namespace dsx::engine {
namespace {

// Seconds on the steady clock.
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

monitor::MonitorSettings monitor_settings(const config::EngineConfig& c) {
  monitor::MonitorSettings s;
  s.tensorboard = {c.tensorboard.enabled, c.tensorboard.output_path, c.tensorboard.job_name};
  s.csv_monitor = {c.csv_monitor.enabled, c.csv_monitor.output_path, c.csv_monitor.job_name};
  s.wandb_enabled = c.wandb.enabled;
  s.comet_enabled = c.comet.enabled;
  return s;
}

// DIR/name as users wrote DIR, without the doubled slash of a DIR/ they gave with one.
std::string in_dir(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).lexically_normal().string();
}

// The options, once they name a config (the first thing dsx train checks).
const TrainRunOptions& with_config(const TrainRunOptions& o) {
  if (o.config_path.empty()) {
    throw Error(ErrorKind::Usage, "dsx train needs --deepspeed_config FILE (ready ones are in configs/)");
  }
  return o;
}

config::EngineConfig read_config(const TrainRunOptions& o, const models::ModelSource& choice, const comm::RankEnv& env) {
  config::ConfigInputs inputs;
  inputs.world_size = env.world_size;
  inputs.hidden_size = choice.shape.hidden_size();
  inputs.total_steps = o.steps;
  inputs.total_steps_flag = "--steps";
  inputs.micro_batch = o.micro_batch;
  inputs.grad_accum = o.grad_accum;
  inputs.learning_rate = o.learning_rate;
  inputs.warmup_steps = o.warmup_steps;
  inputs.strict = o.strict_config;
  // `dsx torchrun --nnodes MIN:MAX` says so: the world may differ from the config's.
  const char* elastic = std::getenv("DSX_ELASTIC_BATCH");
  inputs.keep_train_batch_size = elastic && std::string(elastic) == "1";
  return config::read_ds_config_file(o.config_path, inputs);
}

// Where ZeRO's state lives decides the backend (never only whether a GPU is visible).
Arrangement arrange(const config::EngineConfig& config, bool cuda) {
  ArrangementInputs placement;
  placement.model_on_gpu = cuda;
  placement.offload_optimizer = config.zero_optimization.optimizer_offloaded();
  placement.offload_param = config.zero_optimization.params_offloaded();
  placement.backend_request = comm::comm_options_from_environment().backend;
  placement.device_resident_supported = device_resident_zero_built();
  placement.ranks_share_a_gpu = cuda && local_ranks() > models::cuda_device_count();
  Arrangement a = choose_arrangement(placement);
  // The GPU follows the arrangement: ranks may share one when their collectives go over ofi,
  // whatever DSX_COMM_BACKEND says (it may be unset while the arrangement chose ofi).
  if (cuda) models::choose_rank_gpu(kernels::parse_local_rank(std::getenv("LOCAL_RANK")), a.backend == "ofi");
  return a;
}

comm::CommOptions comm_options_for(const Arrangement& arrangement) {
  comm::CommOptions options = comm::comm_options_from_environment();
  options.backend = arrangement.backend;
  options.buffers_on_gpu = arrangement.zero_on_gpu;
  return options;
}

// comms_logger: every collective of the run goes through a recording communicator.
std::unique_ptr<comm::LoggingCommunicator> comms_logger_for(const config::EngineConfig& config, comm::Session& session) {
  if (!config.comms_logger || !config.comms_logger->enabled) return nullptr;
  const auto& c = *config.comms_logger;
  return std::make_unique<comm::LoggingCommunicator>(
      session.world(), c.prof_all ? std::vector<std::string>{} : c.prof_ops, c.verbose);
}

// The addition task's own length; else --seq_len, else the model's maximum.
int sequence_length(const TrainRunOptions& o, const models::AdditionTask& task, const models::ModelShape& shape) {
  if (o.seq_len < 0) throw Error(ErrorKind::Usage, "--seq_len must be positive, not " + std::to_string(o.seq_len));
  if (o.data == "addition" && o.seq_len > 0) {
    throw Error(ErrorKind::Usage, "--seq_len is for text:, jsonl: and shards: data; the addition task's rows are "
                                  "as long as --digits makes them");
  }
  const int seq = o.data == "addition" ? task.seq_len() : o.seq_len > 0 ? o.seq_len : shape.max_seq_len();
  if (seq > shape.max_seq_len()) {
    const std::string what = o.data == "addition" ? "the addition task with --digits " + std::to_string(o.digits)
                                                  : "--seq_len " + std::to_string(seq);
    const bool llama = shape.family == models::ModelShape::Family::Llama;
    throw Error(ErrorKind::Usage, what + " needs " + std::to_string(seq) + " positions; model " + o.model + " has " +
                                      std::to_string(shape.max_seq_len()) +
                                      (llama ? " (" + models::longest_exact_sequence_reason(shape.llama) + ")" : ""));
  }
  return seq;
}

// `gpu`: the device ZeRO keeps its state on, whose compute stream the model computes on.
std::unique_ptr<models::Model> build_model(const config::EngineConfig& config, const models::ModelShape& shape, bool cuda,
                                           int micro, int seq, device::Device* gpu) {
  models::BuildOptions options;
  options.cuda = cuda;
  options.dtype = !cuda                ? kernels::DType::F32
                  : config.bf16.enabled ? kernels::DType::BF16
                  : config.fp16.enabled ? kernels::DType::F16
                                        : kernels::DType::F32;
  options.max_batch = micro;
  options.max_seq = seq;
  options.activation_checkpointing = config.activation_checkpointing.given;
  options.cpu_bf16_gemms = !cuda && config.bf16.enabled;
  if (gpu) options.stream = gpu->compute_stream().native();
  return models::build_model(shape, options);
}

// --bnb-4bit-*: how --load-in-4bit quantises.
models::Nf4LoadOptions qlora_load_options(const TrainRunOptions& o) {
  models::Nf4LoadOptions quantization;
  quantization.double_quant = o.bnb_double_quant;
  quantization.compute = models::bnb_compute_dtype(o.bnb_compute_dtype);
  return quantization;
}

// QLoRA: the NF4 base, whole on every rank at stages 0-2 (on CPU ranks or the GPU); on CPU ranks
// at stage 3 partitioned as it is stored (4-bit codes and absmax, never dequantised) and
// gathered per layer.
std::unique_ptr<models::Model> build_qlora_model(const TrainRunOptions& o, const config::EngineConfig& config,
                                                 const models::ModelSource& choice, const models::LoraConfig& lora,
                                                 const models::BuildOptions& options, comm::Communicator& comm) {
  const models::Nf4LoadOptions quantization = qlora_load_options(o);
  if (options.cuda && config.zero_optimization.stage == 3)
    throw Error(ErrorKind::Unsupported,
                "QLoRA on the GPU: ZeRO stage 3 does not partition the NF4 base there yet; "
                "set zero_optimization.stage to 0, 1 or 2 (the adapters are all that "
                "trains), or train on CPU ranks (--device cpu)");
  if (options.cuda) return models::make_qlora_model_on_gpu(choice, lora, quantization, options);
  if (config.zero_optimization.stage != 3)
    return models::make_qlora_model(choice, lora, quantization, options);
  models::Nf4FrozenWeights whole(choice.shape.llama, models::read_nf4_base_weights(choice.folder, quantization),
                                 choice.folder);
  auto frozen = std::make_unique<PartitionedNf4FrozenWeights>(whole, choice.shape.llama.num_layers, comm);
  return models::make_lora_model(choice.shape, std::move(frozen), lora, options);
}

// QLoRA reads the base itself, as NF4: here only its shape and folder.
models::ModelSource load_choice(const TrainRunOptions& o) {
  if (o.load_in_4bit && o.lora.empty())
    throw Error(ErrorKind::Usage, "--load-in-4bit trains LoRA adapters on an NF4 base (QLoRA): add --lora");
  if (!o.lora.empty() && models::wants_qlora(o.model, o.load_in_4bit)) return models::qlora_model_source(o.model);
  if (std::filesystem::is_directory(o.model) && models::hf_folder_is_bnb_4bit(o.model))
    throw Error(ErrorKind::Usage, "--model '" + o.model + "' is saved with bitsandbytes 4-bit; its base is frozen, so "
                                  "train it with --lora (QLoRA, docs/lora.md)");
  return models::load_model_source(o.model);
}

// LoRA on the GPU: the base copied to the device whole, on every rank; at stage 3 partitioned
// over the ranks in the GPU memory ZeRO keeps its state in (`gpu`), gathered layer by layer.
std::unique_ptr<models::Model> build_lora_model_on_gpu(
    const config::EngineConfig& config, models::ModelSource& choice, const models::LoraConfig& lora,
    const models::BuildOptions& options, comm::Communicator& comm, device::Device* gpu) {
  std::unique_ptr<models::ParamAccess> frozen;
  if (config.zero_optimization.stage == 3) {
    if (choice.shape.family == models::ModelShape::Family::GPT2)
      throw Error(ErrorKind::Unsupported,
                  "GPT-2 LoRA on the GPU runs at ZeRO stage 0-2 so far: set zero_optimization.stage "
                  "to 0, 1 or 2, or train on CPU ranks (--device cpu)");
    if (!gpu)
      throw Error(ErrorKind::Unsupported,
                  "LoRA on the GPU at ZeRO stage 3 partitions the frozen base in the GPU "
                  "memory ZeRO keeps its state in, but this run keeps ZeRO in host memory "
                  "(offload_optimizer/offload_param): drop the offload, or set "
                  "zero_optimization.stage to 0, 1 or 2");
    frozen = std::make_unique<DevicePartitionedFrozenWeights>(
        models::param_specs(choice.shape), choice.initial, options.dtype, *gpu, comm);
  }
  auto model = models::make_lora_model_on_gpu(choice.shape, choice.initial, lora, options,
                                              std::move(frozen));
  std::vector<float>().swap(choice.initial);  // on the device now
  return model;
}

// --lora: the base that --model named, frozen, with adapters to train (the base's weights move
// out of `choice`; a preset's are drawn from the seed). At stage 3 the base is partitioned too.
// `gpu`: as build_model's.
std::unique_ptr<models::Model> build_lora_model(const TrainRunOptions& o, const config::EngineConfig& config,
                                                models::ModelSource& choice, bool cuda, int micro, int seq,
                                                comm::Communicator& comm, device::Device* gpu) {
  models::BuildOptions options;
  options.cuda = cuda, options.max_batch = micro, options.max_seq = seq;
  options.activation_checkpointing = config.activation_checkpointing.given;
  options.cpu_bf16_gemms = !cuda && config.bf16.enabled;  // the frozen base's products, as a full run's
  if (choice.initial.empty() && !models::wants_qlora(o.model, o.load_in_4bit))
    choice.initial = models::initial_parameters(choice.shape, o.seed);
  const models::LoraConfig lora = models::parse_lora_flag(o.lora);
  if (cuda) {
    options.dtype = config.bf16.enabled ? kernels::DType::BF16
                    : config.fp16.enabled ? kernels::DType::F16
                                          : kernels::DType::F32;
    if (gpu) options.stream = gpu->compute_stream().native();
  }
  if (models::wants_qlora(o.model, o.load_in_4bit))
    return build_qlora_model(o, config, choice, lora, options, comm);
  if (cuda) return build_lora_model_on_gpu(config, choice, lora, options, comm, gpu);
  if (config.zero_optimization.stage == 3 && choice.shape.family == models::ModelShape::Family::Llama) {
    auto frozen = std::make_unique<PartitionedFrozenWeights>(models::param_specs(choice.shape), choice.initial, comm);
    std::vector<float>().swap(choice.initial);
    return models::make_lora_model(choice.shape, std::move(frozen), lora, options);
  }
  return models::make_lora_model(choice.shape, std::move(choice.initial), lora, options);
}

// A LoRA run starts from PEFT's initialisation, or from the adapter in the --lora folder when
// it holds one (PEFT's or an earlier run's). They become `choice`'s weights: the model's flat
// layout is the adapters'.
const float* initial_adapters(models::ModelSource& choice, const models::Model& model, const TrainRunOptions& o) {
  choice.initial.assign(model.num_params(), 0.0f);
  if (std::filesystem::exists(o.lora + "/adapter_model.safetensors"))
    models::read_peft_adapter_weights(o.lora, model.params(), choice.initial.data());
  else
    dynamic_cast<const models::LoraModel&>(model).init_adapters(choice.initial.data(), o.seed);
  return choice.initial.data();
}

// fp32 initial weights, whatever the model computes in (the same values on CPU and GPU).
const float* initial_weights(models::ModelSource& choice, uint64_t seed) {
  if (choice.initial.empty()) choice.initial = models::initial_parameters(choice.shape, seed);
  return choice.initial.data();
}

// --epochs becomes a number of steps once the data is known; a profiled autotuning trial trains
// to end_profile_step.
int64_t steps_to_run(const TrainRunOptions& o, const config::EngineConfig& config, const models::DataLoader& loader,
                     const models::Model& model) {
  if (loader.vocab_size() > model.vocab_size()) {
    throw Error(ErrorKind::Usage, "the data has " + std::to_string(loader.vocab_size()) + " token ids but model " +
                                      o.model + " only " + std::to_string(model.vocab_size()));
  }
  int64_t steps = o.steps;
  if (o.epochs > 0) {
    const uint64_t batches = loader.batches_per_epoch();
    if (batches == 0) throw Error(ErrorKind::Usage, "--epochs needs data of finite size (text: or shards:); use --steps");
    steps = std::max<int64_t>(1, static_cast<int64_t>(batches) * o.epochs / config.gradient_accumulation_steps);
  }
  if (config.autotuning.enabled && config.autotuning.metric_path) steps = config.autotuning.end_profile_step;
  return steps;
}

// --profile / --profile_schedule, else the config's "trace" block; nothing when neither asks.
std::optional<TraceSettings> trace_settings(const TrainRunOptions& o, const config::EngineConfig& config) {
  if (o.profile_dir.empty() && !config.trace.enabled) {
    if (o.profile_schedule) throw Error(ErrorKind::Usage, "--profile_schedule needs --profile DIR");
    return std::nullopt;
  }
  TraceSettings s;
  s.dir = o.profile_dir.empty() ? config.trace.output_path : o.profile_dir;
  if (o.profile_schedule) {
    s.schedule = trace::parse_profile_schedule(*o.profile_schedule);
  } else {
    s.schedule = {config.trace.wait, config.trace.warmup, config.trace.active, config.trace.repeat};
  }
  return s;
}

progress::ProgressDisplay::Options display_options(const TrainRunOptions& o, int64_t steps) {
  progress::ProgressDisplay::Options options;
  if (o.progress == "bar") options.mode = progress::ProgressDisplay::Mode::Terminal;
  if (o.progress == "plain") options.mode = progress::ProgressDisplay::Mode::Plain;
  options.plain_every = std::max<int64_t>(1, steps / 20);
  return options;
}

// One rank's run, its pieces declared in the order they are made.
class TrainingRun {
 public:
  explicit TrainingRun(const TrainRunOptions& o)
      : o_(with_config(o)), choice_(load_choice(o)), env_(rank_env()), config_(read_config(o, choice_, env_)),
        cuda_(wants_cuda(o.device, choice_.shape)), arrangement_(arrange(config_, cuda_)),
        session_(env_, comm_options_for(arrangement_)),
        gpu_(arrangement_.zero_on_gpu ? device::make_cuda_device() : nullptr),
        logged_(comms_logger_for(config_, session_)),
        comm_(logged_ ? static_cast<comm::Communicator&>(*logged_) : session_.world()), rank_(comm_.rank()),
        lead_(rank_ == 0), task_(o.digits), micro_(static_cast<int>(config_.train_micro_batch_size_per_gpu)),
        seq_(sequence_length(o, task_, choice_.shape)),
        model_(o.lora.empty() ? build_model(config_, choice_.shape, cuda_, micro_, seq_, gpu_.get())
                              : build_lora_model(o, config_, choice_, cuda_, micro_, seq_, comm_, gpu_.get())),
        loader_(make_loader(o, choice_, task_, micro_, seq_, rank_, comm_.size())),
        steps_(steps_to_run(o, config_, *loader_, *model_)),
        profiling_(config_.autotuning.enabled && config_.autotuning.metric_path.has_value()),
        trainer_(config_, *model_, comm_,
                 o.lora.empty() ? initial_weights(choice_, o.seed) : initial_adapters(choice_, *model_, o),
                 o.device_memory, gpu_.get()),
        monitors_(monitor_settings(config_), rank_, notes_),
        display_(lead_ ? STDOUT_FILENO : -1, steps_, display_options(o, steps_)),
        throughput_(config_.train_batch_size, config_.steps_per_print) {
    if (auto* lora = dynamic_cast<models::LoraModel*>(model_.get())) {
      if (auto* partitioned = dynamic_cast<PartitionedFrozenWeights*>(&lora->frozen()))
        partitioned->order_on(trainer_.zero().device(), trainer_.zero().comm_stream());
      if (auto* partitioned = dynamic_cast<PartitionedNf4FrozenWeights*>(&lora->frozen()))
        partitioned->order_on(trainer_.zero().device(), trainer_.zero().comm_stream());
      if (auto* partitioned = dynamic_cast<DevicePartitionedFrozenWeights*>(&lora->frozen()))
        partitioned->order_on(trainer_.zero().comm_stream());
    }
  }

  int run() {
    if (!o_.save_dir.empty()) require_writable_directory(o_.save_dir, "--save");
    resume();
    print_header();
    resumed_at_ = trainer_.global_steps();
    const double start = now_seconds();
    display_.start(start);
    throughput_.start(start);
    ProfileWindow window(config_.autotuning.start_profile_step, start);
    auto observers = compose_observers();
    double comm_wait_before = 0;  // waiting for gradient reductions, up to the previous step
    while (trainer_.global_steps() < steps_) {
      const TrainStep step = trainer_.train_batch(*loader_);
      const double comm_wait = trainer_.zero().comm_timing().exposed_seconds - comm_wait_before;
      comm_wait_before += comm_wait;
      const StepEvent event{step, now_seconds(), comm_wait, step.global_step >= steps_};
      window.after_step(event);
      for (auto& observer : observers) observer->after_step(event);
    }
    summary_.steps = trainer_.global_steps();
    summary_.skipped_steps = trainer_.skipped_steps();
    summary_.seconds = now_seconds() - start;
    if (lead_) display_.finish(now_seconds());
    if (profiling_) return end_trial(window);
    return finish();
  }

 private:
  void say(const std::string& line) {
    if (lead_) display_.print_line(line);
  }

  // --load of a directory no save has completed in yet (no `latest`, no checkpoint folder, no
  // --tag) starts from scratch with a note, as DeepSpeed does: job scripts pass the same
  // --load/--save on every run. Checkpoint folders without a `latest` are resumed from, never
  // trained over (find_latest_checkpoint).
  void resume() {
    if (o_.load_dir.empty()) return;
    const ResumePoint point = find_resume_point(o_.load_dir, o_.load_tag, comm_, session_.rendezvous().store());
    if (!point.found) {
      if (lead_) {
        std::cout << "dsx train: no checkpoint in " << o_.load_dir << " yet (no 'latest' file): starting from scratch"
                  << std::endl;  // before training starts, even when the output is piped
      }
      return;
    }
    if (lead_ && !point.note.empty()) std::cout << "dsx train: note: " << point.note << std::endl;
    const std::string tag = load_training_checkpoint(o_.load_dir, point.tag, trainer_, *model_, *loader_, comm_);
    trainer_.params_changed();
    if (auto* lora = dynamic_cast<models::LoraModel*>(model_.get()))
      lora->resume_dropout_after(static_cast<uint64_t>(trainer_.micro_steps()));
    const int64_t at = trainer_.global_steps();
    std::string line = "resumed from " + in_dir(o_.load_dir, tag) + " at step " + std::to_string(at);
    if (at >= steps_) {  // --steps counts from step 0, as DeepSpeed's global step
      line += (at == steps_ ? ", the last of " : ", beyond ") + steps_flag() + ": nothing to train, " +
              (saves_untrained() ? "saving it to " + o_.save_dir + " for this run's ranks and stage"
                                 : "no new checkpoint");
      if (at > steps_) {
        line += " (--steps counts optimizer steps from step 0, not from the resume: to train " +
                std::to_string(steps_) + " more steps, pass --steps " + std::to_string(at + steps_) + ")";
      }
    }
    if (lead_) std::cout << "dsx train: " << line << std::endl;
  }

  std::string steps_flag() const {
    return o_.epochs > 0 ? "--epochs " + std::to_string(o_.epochs) + " (" + std::to_string(steps_) + " steps)"
                         : "--steps " + std::to_string(steps_);
  }

  // A run that trains nothing saves only into another directory than it loaded from (a copy
  // re-cut for this run's ranks and stage); into the same one it would only save again.
  bool saves_untrained() const {
    std::error_code ec;
    return !o_.save_dir.empty() && !std::filesystem::equivalent(o_.load_dir, o_.save_dir, ec);
  }

  void print_header() {
    if (!lead_) return;
    std::ostringstream head;
    head << "dsx train: " << o_.model << " (" << model_->num_params() << " parameters), " << comm_.size()
         << " rank(s) over " << comm_.backend() << ", ZeRO stage " << config_.zero_optimization.stage
         << (config_.zero_optimization.overlap_comm ? " with overlap_comm" : "") << ", " << config_.model_dtype()
         << ", batch " << config_.train_batch_size << " = " << micro_ << " x " << config_.gradient_accumulation_steps
         << " x " << comm_.size() << ", " << steps_ << " steps" << (cuda_ ? ", on the GPU" : "");
    if (o_.device_memory) head << ", at most " << o_.device_memory / 1e6 << " MB per rank";
    if (profiling_) head << " (profiled trial: metrics to " << *config_.autotuning.metric_path << ")";
    say(head.str());
    say("arrangement: " + arrangement_.summary);
    if (const auto* lora = dynamic_cast<const models::LoraModel*>(model_.get())) {
      const auto* on_gpu = dynamic_cast<const DevicePartitionedFrozenWeights*>(&lora->frozen());
      const bool partitioned = dynamic_cast<const PartitionedFrozenWeights*>(&lora->frozen()) ||
                               dynamic_cast<const PartitionedNf4FrozenWeights*>(&lora->frozen()) ||
                               on_gpu;
      std::ostringstream line;
      line << "LoRA: the " << model_->num_params() << " parameters are adapters (r " << lora->lora().r << ", scale "
           << lora->lora().scaling() << "); the base's " << lora->base_numel() << " are frozen"
           << (partitioned ? ", partitioned over the ranks" : ", whole on every rank");
      if (const auto* nf4 = dynamic_cast<const models::Nf4FrozenWeights*>(&lora->frozen()))
        line << " (QLoRA: block linears in NF4, " << nf4->nf4_bytes() << " bytes, the rest fp32, "
             << nf4->dense_bytes() << " bytes)";
      if (cuda_ && models::wants_qlora(o_.model, o_.load_in_4bit))
        line << " (QLoRA: block linears in NF4 on the GPU; the base holds "
             << model_->frozen_bytes() << " bytes of device memory)";
      if (const auto* nf4 = dynamic_cast<const PartitionedNf4FrozenWeights*>(&lora->frozen()))
        line << " (QLoRA: block linears in NF4, the rest fp32; this rank keeps " << nf4->share_bytes()
             << " bytes, and gathers at most " << nf4->largest_gathered_bytes() << " more for a layer)";
      if (on_gpu)
        line << " (in GPU memory: this rank keeps " << on_gpu->held_bytes()
             << " bytes, and gathers at most " << on_gpu->largest_layer_bytes() << " for a layer)";
      say(line.str());
    }
    if (const std::string data = loader_->describe(); !data.empty()) say("data: " + data);
    say("ZeRO holds on rank 0 (" + trainer_.zero().device().name() + "): " + trainer_.zero().memory().report());
    for (const auto& note : trainer_.notes()) say("note: " + note);
    std::istringstream in(notes_.str());
    for (std::string line; std::getline(in, line);) say("note: " + line);
    for (const auto& w : config_.warnings) say("config warning: " + w.path + ": " + w.message);
    if (!config_.elastic_batch_change.empty()) say("elastic: " + config_.elastic_batch_change);
  }

  // What acts between steps, in the order it acts (engine/observers/).
  std::vector<std::unique_ptr<StepObserver>> compose_observers() {
    const Say say = [this](const std::string& line) { this->say(line); };
    std::vector<std::unique_ptr<StepObserver>> observers;
    observers.push_back(std::make_unique<RunTotals>(summary_));
    observers.push_back(std::make_unique<DivergenceGuard>(o_.max_nonfinite_steps));
    // The bar first: lines printed below then redraw it at this step, never behind it.
    if (lead_) observers.push_back(std::make_unique<ProgressUpdater>(display_));
    if (lead_) {
      observers.push_back(std::make_unique<MonitorWriter>(config_, monitors_));
      observers.push_back(std::make_unique<StepLogPrinter>(config_, trainer_, rank_, say));
      if (config_.flops_profiler.enabled) {
        observers.push_back(std::make_unique<FlopsProfileWriter>(
            config_, model_->forward_flops(micro_, seq_), model_->num_params(), comm_.size(), say));
      }
    }
    observers.push_back(std::make_unique<ThroughputPrinter>(
        throughput_, static_cast<int>(config_.gradient_accumulation_steps), rank_, say));
    observers.push_back(std::make_unique<PeriodicAction>(o_.eval_interval, [this](int64_t s) { evaluate(s); }));
    if (!o_.save_dir.empty()) {
      observers.push_back(std::make_unique<PeriodicAction>(
          o_.save_interval, [this](int64_t) { save("every " + std::to_string(o_.save_interval) + " steps"); }));
    }
    // Last: what the others do after a traced step (an evaluation, a save) is in its window.
    if (auto settings = trace_settings(o_, config_)) {
      observers.push_back(std::make_unique<TraceWindow>(
          *settings, rank_, comm_.size(), session_.rendezvous().store(),
          [this] { return trainer_.zero().comm_timing(); }, say, trainer_.global_steps()));
    }
    // After the save and the evaluation too: the launcher counts their time as the step's. A run
    // with no step left (resumed at its end) is not watched: it would never write its "end".
    if (trainer_.global_steps() < steps_)
      observers.push_back(std::make_unique<ProgressBeat>(trainer_.global_steps()));
    return observers;
  }

  void evaluate(int64_t step) {
    if (o_.data != "addition") return;
    trace::Scope span("evaluation", "phase");
    trainer_.zero().begin_micro_step(false);
    const double acc = models::addition_accuracy(*model_, trainer_.params(), task_, o_.eval_samples, micro_);
    std::ostringstream line;
    line << "step " << step << ": held-out accuracy " << static_cast<int>(acc * 1000 + 0.5) / 10.0 << "% ("
         << o_.eval_samples << " unseen sums)";
    say(line.str());
  }

  std::string save(const std::string& why) {
    const std::string tag = save_training_checkpoint(
        o_.save_dir, "", trainer_, *model_, *loader_, comm_, session_.rendezvous().store(),
        run_description(choice_, o_.seed, o_.config_path, lora_adapter_config(), quantization_config()),
        SaveOptions{config_.checkpoint.tag_validation, config_.checkpoint.use_node_local_storage});
    say("saved checkpoint " + in_dir(o_.save_dir, tag) + " (" + why + ")");
    return tag;
  }

  // An autotuning trial ends with its metrics file instead of the usual end.
  int end_trial(const ProfileWindow& window) {
    write_trial_metrics(config_, trainer_, *model_, seq_,
                        steps_ - config_.autotuning.start_profile_step, window.seconds(), window.spread(),
                        session_.rendezvous().store(), rank_, comm_.size(), o_.device_memory);
    if (lead_) {
      std::cout << "dsx train: metrics of steps " << config_.autotuning.start_profile_step + 1 << "-" << steps_
                << " written to " << *config_.autotuning.metric_path << "\n";
    }
    comm_.barrier()->wait();
    return 0;
  }

  int finish() {
    evaluate(trainer_.global_steps());
    if (config_.memory_breakdown) say("memory (rank 0): " + trainer_.zero().memory().report());
    if (logged_ && lead_) {
      std::istringstream lines("comms_logger (rank 0):\n" + logged_->summary());
      for (std::string line; std::getline(lines, line);) say(line);
    }
    add_resource_rows(summary_, trainer_.zero(), comm_.size());
    monitors_.flush();
    // The trained weights, full, for `dsx sample` and Hugging Face (a collective at stage 3).
    std::vector<float> weights(model_->num_params());
    trainer_.zero().gather_params(weights.data());
    if (!o_.save_dir.empty() && (trainer_.global_steps() > resumed_at_ || saves_untrained())) {
      summary_.extra.push_back({"checkpoint", in_dir(o_.save_dir, save("end of training"))});
      if (lead_) write_weights(weights);
    }
    std::vector<std::string> log_dirs = monitors_.log_dirs();
    log_dirs.erase(std::unique(log_dirs.begin(), log_dirs.end()), log_dirs.end());
    for (const auto& dir : log_dirs) summary_.extra.push_back({"monitor logs", dir});
    if (lead_) {
      std::cout << progress::format_summary(summary_);
      if (o_.data == "addition" && o_.samples_to_show > 0 && o_.lora.empty()) {
        print_samples(choice_.shape, weights, task_, seq_, o_.seed, o_.samples_to_show);
      }
      std::cout.flush();
    }
    comm_.barrier()->wait();
    return 0;
  }

  // QLoRA quantising its base at load: how, so that dsx export --merged dequantises the same base.
  std::string quantization_config() const {
    if (!o_.load_in_4bit || o_.lora.empty()) return "";
    return models::bnb_4bit_config_json(qlora_load_options(o_));
  }

  std::string lora_adapter_config() const {
    const auto* lora = dynamic_cast<const models::LoraModel*>(model_.get());
    return lora ? models::peft_adapter_config_json(lora->lora(), choice_.folder) : "";
  }

  void write_weights(const std::vector<float>& weights) {
    std::filesystem::create_directories(o_.save_dir);
    if (const auto* lora = dynamic_cast<const models::LoraModel*>(model_.get())) {
      models::write_peft_adapter(o_.save_dir, lora->lora(), choice_.folder, lora->params(), weights.data());
      summary_.extra.push_back({"adapter", in_dir(o_.save_dir, "adapter_model.safetensors") +
                                               " (PEFT: PeftModel.from_pretrained(base, dir) loads it)"});
      return;
    }
    const std::string path = in_dir(o_.save_dir, "model.safetensors");
    models::write_hf_weights(path, choice_.shape, weights.data(), kernels::DType::F32, choice_.folder);
    summary_.extra.push_back({"weights", path + " (Hugging Face " + choice_.shape.family_name() + " layout)"});
  }

  const TrainRunOptions& o_;
  models::ModelSource choice_;
  comm::RankEnv env_;
  config::EngineConfig config_;
  bool cuda_;
  Arrangement arrangement_;
  comm::Session session_;
  std::unique_ptr<device::Device> gpu_;  // device-resident ZeRO: the rank's GPU
  std::unique_ptr<comm::LoggingCommunicator> logged_;
  comm::Communicator& comm_;
  int rank_;
  bool lead_;
  models::AdditionTask task_;
  int micro_, seq_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::DataLoader> loader_;
  int64_t steps_;
  int64_t resumed_at_ = 0;  // the step training starts from: 0, or the checkpoint's
  bool profiling_;
  Trainer trainer_;
  std::ostringstream notes_;  // the monitors' notes, printed with the header
  monitor::MonitorMaster monitors_;
  progress::ProgressDisplay display_;
  progress::ThroughputTimer throughput_;
  progress::RunSummary summary_;
};

}  // namespace

int run_training(const TrainRunOptions& o) {
  TrainingRun run(o);
  return run.run();
}

}  // namespace dsx::engine
