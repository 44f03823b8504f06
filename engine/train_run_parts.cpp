// See train_run_parts.h.
#include "engine/train_run_parts.h"

#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

#include "dataset/instruction_data.h"
#include "dataset/packed_text.h"
#include "dataset/shard_data.h"
#include "dsx/error.h"
#include "engine/observers/profile_metrics.h"
#include "engine/flops_profiler.h"
#include "models/data/token_loader.h"
#include "models/gpt2/factory.h"
#include "models/local_params.h"
#include "models/sampling.h"

namespace dsx::engine {

namespace {

std::string answer_line(models::Model& model, models::ParamAccess& access, const models::AdditionTask& task,
                        uint64_t a, uint64_t b) {
  const std::string prompt = task.prompt(a, b);
  models::SampleOptions so;
  so.max_new_tokens = task.digits() + 2;
  so.temperature = 0;
  so.stop_tokens = {'\n'};
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

// The tokenizer text and instruction data go through: --tokenizer, else the model folder's when it
// has one; "" means bytes (byte-level models).
std::string text_tokenizer_folder(const TrainRunOptions& o, const models::ModelSource& model) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  if (model.folder.empty()) return "";
  for (const char* file : {"tokenizer.json", "tokenizer.model"}) {
    if (std::filesystem::exists(std::filesystem::path(model.folder) / file)) return model.folder;
  }
  return "";
}

// Every rank of a node encodes its data at start: they share the node's cores.
unsigned encoding_threads() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, cores / static_cast<unsigned>(local_ranks()));
}

}  // namespace

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

comm::RankEnv rank_env() {
  if (std::getenv("RANK") || std::getenv("WORLD_SIZE")) return comm::rank_env_from_environment();
  comm::RankEnv env;
  env.master.port = 0;  // a lone process: any free port
  return env;
}

monitor::MonitorSettings monitor_settings(const config::EngineConfig& c) {
  monitor::MonitorSettings s;
  s.tensorboard = {c.tensorboard.enabled, c.tensorboard.output_path, c.tensorboard.job_name};
  s.csv_monitor = {c.csv_monitor.enabled, c.csv_monitor.output_path, c.csv_monitor.job_name};
  s.wandb_enabled = c.wandb.enabled;
  s.comet_enabled = c.comet.enabled;
  return s;
}

models::ModelSource choose_model(const TrainRunOptions& o) { return models::load_model_source(o.model); }

std::unique_ptr<models::DataLoader> make_loader(const TrainRunOptions& o, const models::ModelSource& model,
                                                const models::AdditionTask& task, int micro_batch, int seq_len,
                                                int rank, int world) {
  if (o.data == "addition") {
    // The built-in task is bytes: a folder with a tokenizer came to be fine-tuned on text.
    if (!model.folder.empty() && !text_tokenizer_folder(o, model).empty()) {
      throw Error(ErrorKind::Usage, "--model " + o.model + " has a tokenizer, and --data is the built-in byte-level "
                                    "addition task; give --data text:FILE, jsonl:FILE or shards:GLOB to fine-tune it");
    }
    return std::make_unique<models::AdditionLoader>(task, micro_batch, rank, world, o.seed);
  }
  models::TokenLoaderOptions t;
  t.batch = micro_batch;
  t.seq_len = seq_len;
  t.rank = rank;
  t.world = world;
  t.shuffle = true;
  t.seed = o.seed;
  if (o.data.rfind("shards:", 0) == 0) return dataset::make_shard_loader(o.data.substr(7), t);
  if (o.data.rfind("text:", 0) == 0) {
    const std::string tokenizer = text_tokenizer_folder(o, model);
    if (tokenizer.empty()) return models::TokenLoader::text(o.data.substr(5), t);
    dataset::TextDataOptions text;
    text.threads = encoding_threads();
    return dataset::make_tokenized_text_loader(o.data.substr(5), tokenizer, t, text);
  }
  if (o.data.rfind("jsonl:", 0) == 0) {
    const std::string tokenizer = text_tokenizer_folder(o, model);
    if (tokenizer.empty()) {
      throw Error(ErrorKind::Usage, "--data jsonl: needs a tokenizer: a --model folder with tokenizer files, or "
                                    "--tokenizer DIR");
    }
    return dataset::make_instruction_loader(o.data.substr(6), tokenizer, t, encoding_threads());
  }
  throw Error(ErrorKind::Usage, "--data must be addition, text:FILE, jsonl:FILE or shards:GLOB, not '" + o.data + "'");
}

std::string run_description(const models::ModelSource& model, uint64_t seed, const std::string& config_path) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("model");
  models::write_shape_json(w, model.shape);
  if (!model.folder.empty()) {
    const std::string folder = std::filesystem::absolute(model.folder).lexically_normal().string();
    w.Key("source_folder"), w.String(folder.c_str(), static_cast<rapidjson::SizeType>(folder.size()));
  }
  w.Key("seed"), w.Uint64(seed);
  std::ifstream in(config_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  w.Key("ds_config"), w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  w.EndObject();
  return buffer.GetString();
}

void write_trial_metrics(const config::EngineConfig& config, Trainer& trainer, const models::Model& model,
                         int seq, int64_t profiled_steps, double seconds,
                         double spread, comm::Store& store, int rank, int world, size_t memory_limit) {
  store.set("autotune/peak/" + std::to_string(rank), std::to_string(trainer.zero().memory().peak_total()));
  if (rank != 0) return;
  ProfileMetrics m;
  for (int r = 0; r < world; ++r) {
    const std::string peak = store.get("autotune/peak/" + std::to_string(r), std::chrono::minutes(2));
    m.peak_memory_bytes = std::max<int64_t>(m.peak_memory_bytes, std::stoll(peak));
  }
  const double micro = static_cast<double>(config.train_micro_batch_size_per_gpu);
  m.profiled_steps = profiled_steps;
  m.latency = seconds / static_cast<double>(profiled_steps);
  m.throughput = static_cast<double>(config.train_batch_size) / m.latency;
  m.flops_per_gpu = 3 * model.forward_flops(static_cast<int64_t>(micro), seq) *
                    static_cast<double>(config.gradient_accumulation_steps) / m.latency;
  m.activation_bytes = static_cast<int64_t>(model.activation_bytes());
  m.memory_limit_bytes = static_cast<int64_t>(memory_limit);
  m.latency_spread = spread;
  write_profile_metrics(*config.autotuning.metric_path, m);
}

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

void print_samples(const models::ModelShape& shape, const std::vector<float>& weights, const models::AdditionTask& task,
                   int seq, uint64_t seed, int count) {
  std::cout << "samples from the trained model (greedy; sums it never trained on):\n";
  auto sampler = models::build_host_model(shape, 1, seq);  // on the host, whatever trained
  models::LocalParams<float> local(*sampler);
  std::copy(weights.begin(), weights.end(), local.params());
  for (int i = 0; i < count; ++i) {
    uint64_t a, b;
    task.pair(seed + 99, static_cast<uint64_t>(i), true, a, b);
    std::cout << answer_line(*sampler, local, task, a, b) << "\n";
  }
}

void require_writable_directory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string probe = dir + "/.dsx-write-test-" + std::to_string(::getpid());
  if (!ec) {
    std::ofstream out(probe, std::ios::binary);
    out << "dsx";
    out.flush();
    if (!out) ec = std::error_code(errno ? errno : EIO, std::generic_category());
  }
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
  if (ec) {
    throw Error(ErrorKind::Io, flag + " " + dir + ": cannot write there (" + ec.message() +
                                   "); choose a directory this user can create and write, on a disk with room");
  }
}

int local_ranks() {
  const char* v = std::getenv("LOCAL_WORLD_SIZE");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 1;
}

bool wants_cuda(const std::string& device, const models::ModelShape& shape) {
  if (device == "cpu") return false;
  if (device != "cuda" && device != "auto") {
    throw Error(ErrorKind::Usage, "--device must be auto, cpu or cuda, not '" + device + "'");
  }
  const bool visible = models::cuda_device_count() > 0;
  if (device == "cuda" && !visible) {
    throw Error(ErrorKind::Unsupported, "--device cuda: no GPU is visible to this process (a CUDA build of dsx, a "
                                        "driver and CUDA_VISIBLE_DEVICES naming a GPU are needed)");
  }
  // auto: a family without CUDA kernels yet trains on the CPU rather than stopping.
  return visible && (device == "cuda" || models::has_cuda_kernels(shape));
}

}  // namespace dsx::engine
