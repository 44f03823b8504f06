// One rank of `dsx train` (see train_run.h).
#include "engine/train_run.h"

#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "comm/logging_communicator.h"
#include "comm/session.h"
#include "device/cuda_device.h"
#include "dsx/error.h"
#include "engine/arrangement.h"
#include "engine/autotune/profile_metrics.h"
#include "engine/config/ds_config.h"
#include "engine/monitor/monitor_master.h"
#include "engine/observers/flops_profile_writer.h"
#include "engine/observers/monitor_writer.h"
#include "engine/observers/periodic_action.h"
#include "engine/observers/progress_updater.h"
#include "engine/observers/run_totals.h"
#include "engine/observers/step_log_printer.h"
#include "engine/observers/throughput_printer.h"
#include "engine/progress/progress_display.h"
#include "engine/progress/step_log.h"
#include "engine/flops_profiler.h"
#include "engine/train_checkpoint.h"
#include "engine/trainer.h"
#include "models/data/addition.h"
#include "models/data/token_loader.h"
#include "models/gpt2/factory.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/io/gpt2_weights.h"
#include "models/local_params.h"
#include "models/sampling.h"

namespace dsx::engine {
namespace {

using Clock = std::chrono::steady_clock;

double now_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// The rank environment of a launcher, or a job of one when there is none.
comm::RankEnv rank_env() {
  if (std::getenv("RANK") || std::getenv("WORLD_SIZE")) return comm::rank_env_from_environment();
  comm::RankEnv env;
  env.master.port = 0;  // a lone process: any free port
  return env;
}

monitor::MonitorSettings monitor_settings(const EngineConfig& c) {
  monitor::MonitorSettings s;
  s.tensorboard = {c.tensorboard.enabled, c.tensorboard.output_path, c.tensorboard.job_name};
  s.csv_monitor = {c.csv_monitor.enabled, c.csv_monitor.output_path, c.csv_monitor.job_name};
  s.wandb_enabled = c.wandb.enabled;
  s.comet_enabled = c.comet.enabled;
  return s;
}

// The model: a preset trained from scratch, or weights from a file to fine-tune.
struct ModelChoice {
  models::GPT2Config config;
  std::vector<float> initial;
};

ModelChoice choose_model(const TrainRunOptions& o) {
  ModelChoice m;
  if (std::filesystem::exists(o.model)) {
    auto weights = models::load_gpt2_weights(o.model);
    m.config = weights.config;
    m.initial = std::move(weights.params);
  } else {
    m.config = models::gpt2_preset(o.model);
  }
  return m;
}

std::unique_ptr<models::DataLoader> make_loader(const TrainRunOptions& o, const models::AdditionTask& task,
                                                int micro_batch, int seq_len, int rank, int world) {
  if (o.data == "addition") {
    return std::make_unique<models::AdditionLoader>(task, micro_batch, rank, world, o.seed);
  }
  models::TokenLoaderOptions t;
  t.batch = micro_batch;
  t.seq_len = seq_len;
  t.rank = rank;
  t.world = world;
  t.shuffle = true;
  t.seed = o.seed;
  if (o.data.rfind("shards:", 0) == 0) return models::TokenLoader::shards(o.data.substr(7), t);
  if (o.data.rfind("text:", 0) == 0) return models::TokenLoader::text(o.data.substr(5), t);
  throw Error(ErrorKind::Usage, "--data must be addition, text:FILE or shards:GLOB, not '" + o.data + "'");
}

std::string answer_line(models::Model& model, models::ParamAccess& access, const models::AdditionTask& task,
                        uint64_t a, uint64_t b) {
  const std::string prompt = task.prompt(a, b);
  models::SampleOptions so;
  so.max_new_tokens = task.digits() + 2;
  so.temperature = 0;
  so.stop_token = '\n';
  auto out = models::generate(model, access, std::vector<int32_t>(prompt.begin(), prompt.end()), so);
  std::string text(out.begin(), out.end());
  const int64_t got = task.parse_answer(text);
  const bool right = got == static_cast<int64_t>(a + b);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::ostringstream line;
  line << "  " << prompt << text << "   (reversed digits: " << a << " + " << b << " = " << got << ", "
       << (right ? "right" : "wrong, " + std::to_string(a + b)) << ")";
  return line.str();
}

// What a checkpoint keeps about the run besides the tensors: the model's shape (for dsx export),
// the seed (data order and initial weights; training itself draws no random numbers) and the
// ds_config as written.
std::string run_description(const models::GPT2Config& c, uint64_t seed, const std::string& config_path) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("model");
  w.StartObject();
  w.Key("type"), w.String("gpt2");
  w.Key("max_seq_len"), w.Int(c.max_seq_len);
  w.Key("vocab_size"), w.Int(c.vocab_size);
  w.Key("padded_vocab_size"), w.Int(c.padded_vocab_size);
  w.Key("num_layers"), w.Int(c.num_layers);
  w.Key("num_heads"), w.Int(c.num_heads);
  w.Key("channels"), w.Int(c.channels);
  w.EndObject();
  w.Key("seed"), w.Uint64(seed);
  std::ifstream in(config_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  w.Key("ds_config"), w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  w.EndObject();
  return buffer.GetString();
}

// Under DeepSpeed's autotuner the engine times steps (start_profile_step, end_profile_step],
// writes the metrics file and ends the run; dsx adds the most memory any rank held.
void write_trial_metrics(const EngineConfig& config, Trainer& trainer, const models::Model& model,
                         const models::GPT2Config& shape, int seq, int64_t profiled_steps, double seconds,
                         comm::Store& store, int rank, int world, size_t memory_limit) {
  store.set("autotune/peak/" + std::to_string(rank), std::to_string(trainer.zero().memory().peak_total()));
  if (rank != 0) return;
  autotune::ProfileMetrics m;
  for (int r = 0; r < world; ++r) {
    const std::string peak = store.get("autotune/peak/" + std::to_string(r), std::chrono::minutes(2));
    m.peak_memory_bytes = std::max<int64_t>(m.peak_memory_bytes, std::stoll(peak));
  }
  const double micro = static_cast<double>(config.train_micro_batch_size_per_gpu);
  m.profiled_steps = profiled_steps;
  m.latency = seconds / static_cast<double>(profiled_steps);
  m.throughput = static_cast<double>(config.train_batch_size) / m.latency;
  m.flops_per_gpu = 3 * gpt2_forward_flops(shape, static_cast<int64_t>(micro), seq) *
                    static_cast<double>(config.gradient_accumulation_steps) / m.latency;
  m.activation_bytes = static_cast<int64_t>(model.activation_bytes());
  m.memory_limit_bytes = static_cast<int64_t>(memory_limit);
  autotune::write_profile_metrics(*config.autotuning.metric_path, m);
}

// The closing summary's rows of what rank 0 held and how much gradient traffic it sent.
void add_resource_rows(progress::RunSummary& summary, zero::ZeroEngine& zero, int ranks) {
  const zero::MemoryLedger& m = zero.memory();
  const zero::CommTiming& c = zero.comm_timing();
  std::ostringstream mem, com;
  mem.precision(6);
  mem << "params " << m.bytes(zero::MemoryKind::Params) / 1e6 << " MB, grads " << m.bytes(zero::MemoryKind::Grads) / 1e6
      << " MB, optimizer " << m.bytes(zero::MemoryKind::OptimizerState) / 1e6 << " MB, activations "
      << m.bytes(zero::MemoryKind::Activations) / 1e6 << " MB (peak buffers " << m.peak(zero::MemoryKind::Buffers) / 1e6
      << " MB, peak total " << m.peak_total() / 1e6 << " MB)";
  summary.extra.push_back({"rank 0 holds", mem.str()});
  if (ranks > 1) {
    com.precision(3);
    com << c.bus_bytes / 1e6 << " MB sent by rank 0 in " << c.operations << " reductions (" << c.reduce_scatters
        << " reduce-scatters), " << static_cast<int>(c.hidden_fraction() * 100 + 0.5) << "% hidden behind backward";
    summary.extra.push_back({"gradient comm", com.str()});
  }
}

// Greedy answers of the trained model to sums it never trained on, computed on the host.
void print_samples(const models::GPT2Config& shape, const std::vector<float>& weights, const models::AdditionTask& task,
                   int seq, uint64_t seed, int count) {
  std::cout << "samples from the trained model (greedy; sums it never trained on):\n";
  models::GPT2Cpu<float> sampler(shape, 1, seq);  // on the host, whatever trained
  models::LocalParams<float> local(sampler);
  std::copy(weights.begin(), weights.end(), local.params());
  for (int i = 0; i < count; ++i) {
    uint64_t a, b;
    task.pair(seed + 99, static_cast<uint64_t>(i), true, a, b);
    std::cout << answer_line(sampler, local, task, a, b) << "\n";
  }
}

// The ranks on this node, as the launcher (dsx, deepspeed, torchrun) says; 1 when it does not.
int local_ranks() {
  const char* v = std::getenv("LOCAL_WORLD_SIZE");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 1;
}

// --device: "cpu", "cuda", or "auto" (the GPU where the build has CUDA and one is visible).
bool wants_cuda(const std::string& device) {
  if (device == "cpu") return false;
  if (device != "cuda" && device != "auto") {
    throw Error(ErrorKind::Usage, "--device must be auto, cpu or cuda, not '" + device + "'");
  }
  const bool visible = models::cuda_device_count() > 0;
  if (device == "cuda" && !visible) {
    throw Error(ErrorKind::Unsupported, "--device cuda: no GPU is visible to this process (a CUDA build of dsx, a "
                                        "driver and CUDA_VISIBLE_DEVICES naming a GPU are needed)");
  }
  return visible;
}

}  // namespace

int run_training(const TrainRunOptions& o) {
  if (o.config_path.empty()) {
    throw Error(ErrorKind::Usage, "dsx train needs --deepspeed_config FILE (ready ones are in configs/)");
  }
  ModelChoice choice = choose_model(o);
  const comm::RankEnv env = rank_env();
  ConfigInputs inputs;
  inputs.world_size = env.world_size;
  inputs.hidden_size = choice.config.channels;
  inputs.total_steps = o.steps;
  inputs.strict = o.strict_config;
  const EngineConfig config = read_ds_config_file(o.config_path, inputs);

  // Where ZeRO's state lives decides the backend (never only whether a GPU is visible).
  const bool cuda = wants_cuda(o.device);
  comm::CommOptions comm_options = comm::comm_options_from_environment();
  ArrangementInputs placement;
  placement.model_on_gpu = cuda;
  placement.offload_optimizer = config.zero_optimization.optimizer_offloaded();
  placement.offload_param = config.zero_optimization.params_offloaded();
  placement.backend_request = comm_options.backend;
  placement.device_resident_supported = device_resident_zero_built();
  placement.ranks_share_a_gpu = cuda && local_ranks() > models::cuda_device_count();
  const Arrangement arrangement = choose_arrangement(placement);
  comm_options.backend = arrangement.backend;
  comm_options.buffers_on_gpu = arrangement.zero_on_gpu;
  comm::Session session(env, comm_options);
  // Device-resident ZeRO: its state on this rank's GPU, and the model computing on its stream.
  std::unique_ptr<device::Device> gpu = arrangement.zero_on_gpu ? device::make_cuda_device() : nullptr;
  // comms_logger: every collective of the run goes through a recording communicator.
  std::unique_ptr<comm::LoggingCommunicator> logged;
  if (config.comms_logger && config.comms_logger->enabled) {
    const auto& c = *config.comms_logger;
    logged = std::make_unique<comm::LoggingCommunicator>(
        session.world(), c.prof_all ? std::vector<std::string>{} : c.prof_ops, c.verbose);
  }
  comm::Communicator& comm = logged ? static_cast<comm::Communicator&>(*logged) : session.world();
  const int rank = comm.rank();
  const bool lead = rank == 0;

  models::AdditionTask task(o.digits);
  const int micro = static_cast<int>(config.train_micro_batch_size_per_gpu);
  const int seq = o.data == "addition" ? task.seq_len() : choice.config.max_seq_len;
  if (seq > choice.config.max_seq_len) {
    throw Error(ErrorKind::Usage, "the addition task with --digits " + std::to_string(o.digits) + " needs " +
                                      std::to_string(seq) + " positions; model " + o.model + " has " +
                                      std::to_string(choice.config.max_seq_len));
  }
  models::GPT2Options model_options;
  model_options.cuda = cuda;
  model_options.dtype = !cuda                ? kernels::DType::F32
                        : config.bf16.enabled ? kernels::DType::BF16
                        : config.fp16.enabled ? kernels::DType::F16
                                              : kernels::DType::F32;
  model_options.max_batch = micro;
  model_options.max_seq = seq;
  model_options.activation_checkpointing = config.activation_checkpointing.given;
  if (gpu) model_options.stream = gpu->compute_stream().native();
  std::unique_ptr<models::Model> model_owner = models::make_gpt2(choice.config, model_options);
  models::Model& model = *model_owner;
  if (choice.initial.empty()) {
    // fp32 master weights, whatever the model computes in (the same values on CPU and GPU).
    choice.initial.resize(model.num_params());
    models::GPT2Cpu<float>(choice.config, 1, 1).init_params(choice.initial.data(), o.seed);
  }
  auto loader = make_loader(o, task, micro, seq, rank, comm.size());
  if (loader->vocab_size() > model.vocab_size()) {
    throw Error(ErrorKind::Usage, "the data has " + std::to_string(loader->vocab_size()) + " token ids but model " +
                                      o.model + " only " + std::to_string(model.vocab_size()));
  }

  TrainRunOptions run = o;  // --epochs becomes a number of steps once the data is known
  if (o.epochs > 0) {
    const uint64_t batches = loader->batches_per_epoch();
    if (batches == 0) throw Error(ErrorKind::Usage, "--epochs needs data of finite size (text: or shards:); use --steps");
    run.steps = std::max<int64_t>(1, static_cast<int64_t>(batches) * o.epochs / config.gradient_accumulation_steps);
  }
  // A profiled trial (DeepSpeed's autotuner contract): train to end_profile_step, time the
  // steps after start_profile_step.
  const bool profiling = config.autotuning.enabled && config.autotuning.metric_path.has_value();
  if (profiling) run.steps = config.autotuning.end_profile_step;
  Trainer trainer(config, model, comm, choice.initial.data(), o.device_memory, gpu.get());
  // --load of a directory no save has completed in yet (no `latest`, no --tag) starts from scratch
  // with a note, as DeepSpeed does: job scripts pass the same --load/--save on every run.
  const bool nothing_to_load =
      !o.load_dir.empty() && o.load_tag.empty() && !std::filesystem::exists(o.load_dir + "/latest");
  if (nothing_to_load && lead) {
    std::cout << "dsx train: no checkpoint in " << o.load_dir << " yet (no 'latest' file): starting from scratch\n";
  }
  if (!o.load_dir.empty() && !nothing_to_load) {
    const std::string tag = load_training_checkpoint(o.load_dir, o.load_tag, trainer, model, *loader, comm);
    trainer.params_changed();
    if (lead) {
      std::cout << "dsx train: resumed from " << o.load_dir << "/" << tag << " at step " << trainer.global_steps()
                << "\n";
    }
  }
  std::ostringstream notes;
  monitor::MonitorMaster monitors(monitor_settings(config), rank, notes);

  progress::ProgressDisplay::Options display_options;
  if (o.progress == "bar") display_options.mode = progress::ProgressDisplay::Mode::Terminal;
  if (o.progress == "plain") display_options.mode = progress::ProgressDisplay::Mode::Plain;
  display_options.plain_every = std::max<int64_t>(1, run.steps / 20);
  progress::ProgressDisplay display(lead ? STDOUT_FILENO : -1, run.steps, display_options);
  progress::ThroughputTimer throughput(config.train_batch_size, config.steps_per_print);
  auto say = [&](const std::string& line) {
    if (lead) display.print_line(line);
  };
  comm::Store& store = session.rendezvous().store();
  auto save = [&](const std::string& why) {
    const std::string tag =
        save_training_checkpoint(o.save_dir, "", trainer, model, *loader, comm, store,
                                 run_description(choice.config, o.seed, o.config_path),
                                 config.checkpoint.tag_validation);
    if (lead) display.print_line(std::string("saved checkpoint ") + o.save_dir + "/" + tag + " (" + why + ")");
    return tag;
  };

  if (lead) {
    std::ostringstream head;
    head << "dsx train: " << o.model << " (" << model.num_params() << " parameters), " << comm.size()
         << " rank(s) over " << comm.backend() << ", ZeRO stage " << config.zero_optimization.stage
         << (config.zero_optimization.overlap_comm ? " with overlap_comm" : "") << ", " << config.model_dtype()
         << ", batch " << config.train_batch_size << " = " << micro << " x " << config.gradient_accumulation_steps
         << " x " << comm.size() << ", " << run.steps << " steps" << (cuda ? ", on the GPU" : "");
    if (o.device_memory) head << ", at most " << o.device_memory / 1e6 << " MB per rank";
    if (profiling) head << " (profiled trial: metrics to " << *config.autotuning.metric_path << ")";
    say(head.str());
    say("arrangement: " + arrangement.summary);
    say("ZeRO holds on rank 0 (" + trainer.zero().device().name() + "): " + trainer.zero().memory().report());
    for (const auto& note : trainer.notes()) say("note: " + note);
    std::string line;
    std::istringstream in(notes.str());
    while (std::getline(in, line)) say("note: " + line);
    for (const auto& w : config.warnings) say("config warning: " + w.path + ": " + w.message);
  }

  progress::RunSummary summary;
  const double start = now_seconds();
  display.start(start);
  throughput.start(start);
  auto evaluate = [&](int64_t step) {
    if (o.data != "addition") return;
    trainer.zero().begin_micro_step(false);
    const double acc = models::addition_accuracy(model, trainer.params(), task, o.eval_samples, micro);
    std::ostringstream line;
    line << "step " << step << ": held-out accuracy " << static_cast<int>(acc * 1000 + 0.5) / 10.0 << "% ("
         << o.eval_samples << " unseen sums)";
    say(line.str());
  };

  // What acts between steps, in the order it acts (engine/observers/).
  std::vector<std::unique_ptr<StepObserver>> observers;
  observers.push_back(std::make_unique<RunTotals>(summary));
  auto window = std::make_unique<ProfileWindow>(config.autotuning.start_profile_step, start);
  ProfileWindow& profiled = *window;
  observers.push_back(std::move(window));
  if (lead) {
    observers.push_back(std::make_unique<MonitorWriter>(config, monitors));
    observers.push_back(std::make_unique<StepLogPrinter>(config, trainer, rank, say));
    if (config.flops_profiler.enabled) {
      observers.push_back(std::make_unique<FlopsProfileWriter>(config, gpt2_forward_flops(choice.config, micro, seq),
                                                               model.num_params(), comm.size(), say));
    }
  }
  observers.push_back(
      std::make_unique<ThroughputPrinter>(throughput, static_cast<int>(config.gradient_accumulation_steps), rank, say));
  if (lead) observers.push_back(std::make_unique<ProgressUpdater>(display));
  observers.push_back(std::make_unique<PeriodicAction>(o.eval_interval, evaluate));
  if (!o.save_dir.empty()) {
    observers.push_back(std::make_unique<PeriodicAction>(
        o.save_interval, [&](int64_t) { save("every " + std::to_string(o.save_interval) + " steps"); }));
  }

  double comm_wait_before = 0;  // waiting for gradient reductions, up to the previous step
  while (trainer.global_steps() < run.steps) {
    const TrainStep step = trainer.train_batch(*loader);
    const double comm_wait = trainer.zero().comm_timing().exposed_seconds - comm_wait_before;
    comm_wait_before += comm_wait;
    const StepEvent event{step, now_seconds(), comm_wait, step.global_step >= run.steps};
    for (auto& observer : observers) observer->after_step(event);
  }
  summary.steps = trainer.global_steps();
  summary.skipped_steps = trainer.skipped_steps();
  summary.seconds = now_seconds() - start;
  if (lead) display.finish(now_seconds());
  if (profiling) {
    write_trial_metrics(config, trainer, model, choice.config, seq,
                        run.steps - config.autotuning.start_profile_step, profiled.seconds(), store,
                        rank, comm.size(), o.device_memory);
    if (lead) std::cout << "dsx train: metrics of steps " << config.autotuning.start_profile_step + 1 << "-"
                        << run.steps << " written to " << *config.autotuning.metric_path << "\n";
    comm.barrier()->wait();
    return 0;
  }
  evaluate(trainer.global_steps());
  if (config.memory_breakdown) say("memory (rank 0): " + trainer.zero().memory().report());
  if (logged && lead) {
    std::istringstream lines("comms_logger (rank 0):\n" + logged->summary());
    for (std::string line; std::getline(lines, line);) say(line);
  }
  add_resource_rows(summary, trainer.zero(), comm.size());
  monitors.flush();

  // The trained weights, full, for `dsx sample` and Hugging Face (a collective at stage 3).
  std::vector<float> weights(model.num_params());
  trainer.zero().gather_params(weights.data());
  if (!o.save_dir.empty()) summary.extra.push_back({"checkpoint", o.save_dir + "/" + save("end of training")});
  if (lead && !o.save_dir.empty()) {
    std::filesystem::create_directories(o.save_dir);
    const std::string path = o.save_dir + "/model.safetensors";
    models::write_gpt2_safetensors(path, choice.config, weights.data());
    models::write_gpt2_hf_config(o.save_dir + "/config.json", choice.config);
    summary.extra.push_back({"weights", path + " (Hugging Face GPT-2 layout)"});
  }
  std::vector<std::string> log_dirs = monitors.log_dirs();
  log_dirs.erase(std::unique(log_dirs.begin(), log_dirs.end()), log_dirs.end());
  for (const auto& dir : log_dirs) summary.extra.push_back({"monitor logs", dir});
  if (lead) {
    std::cout << progress::format_summary(summary);
    if (o.data == "addition" && o.samples_to_show > 0) {
      print_samples(choice.config, weights, task, seq, o.seed, o.samples_to_show);
    }
    std::cout.flush();
  }
  comm.barrier()->wait();
  return 0;
}

}  // namespace dsx::engine
