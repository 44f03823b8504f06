// `dsx estimate`: how much GPU and CPU memory a training run needs, per ZeRO stage and offload
// choice, and the fewest GPUs that fit. Parses flags and prints; the memory model is in
// engine/estimate/.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "dsx/error.h"
#include "tools/estimate/ds_config_choices.h"
#include "tools/estimate/gpu_catalog.h"
#include "tools/estimate/hf_config.h"
#include "tools/estimate/memory_model.h"
#include "tools/estimate/model_presets.h"
#include "tools/cli.h"
#include "tools/json_fields.h"

namespace dsx::tools {

namespace est = dsx::estimate;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kMostGpus = 8192;  // the largest cluster "fewest GPUs" tries

// One option per line reads as a table.
// clang-format off
po::options_description estimate_options() {
  po::options_description model("model: a preset, a config.json, or a shape");
  model.add_options()
      ("model", po::value<std::string>(), "preset name (see --list), or a size (7B, 1.3B, 7e9)")
      ("hf-config", po::value<std::string>(), "a Hugging Face config.json")
      ("arch", po::value<std::string>()->default_value("llama"), "shape family: gpt2 or llama")
      ("layers", po::value<int64_t>(), "transformer blocks")
      ("hidden", po::value<int64_t>(), "hidden size")
      ("heads", po::value<int64_t>(), "attention heads")
      ("kv-heads", po::value<int64_t>(), "key/value heads (default: heads)")
      ("vocab", po::value<int64_t>(), "vocabulary size")
      ("intermediate", po::value<int64_t>(), "MLP width (default: 4 x hidden)")
      ("tied-embeddings", po::bool_switch(), "lm_head shares the embedding")
      ("params", po::value<std::string>(), "total parameters (e.g. 7e9, 7B, 1.3B), instead of counting them");
  po::options_description run("training");
  run.add_options()
      ("seq-len", po::value<int64_t>(), "tokens per sample (default: the model's maximum)")
      ("micro-batch", po::value<int64_t>()->default_value(1), "samples per GPU per step")
      ("precision", po::value<std::string>()->default_value("bf16"), "bf16, fp16 or fp32")
      ("stage", po::value<std::vector<std::string>>()->composing(), "ZeRO stages, e.g. 2,3 (default: all)")
      ("offload", po::value<std::vector<std::string>>()->composing(),
       "none, optimizer, param (= optimizer and param), nvme (optimizer to NVMe), nvme-param "
       "(both to NVMe); default: all")
      ("method", po::value<std::vector<std::string>>()->composing(),
       "full, lora, qlora (e.g. full,qlora); default: full")
      ("lora-r", po::value<int64_t>()->default_value(8), "LoRA rank r")
      ("lora-targets", po::value<std::vector<std::string>>()->composing(),
       "target modules (q_proj,v_proj by default; all-linear)")
      ("double-quant", po::value<bool>()->default_value(true), "QLoRA: double-quantise the NF4 absmax")
      ("activation-checkpointing", po::bool_switch(), "checkpoint every transformer block")
      ("attention", po::value<std::string>()->default_value("flash"), "flash or eager (stores s x s scores)")
      ("zero-init", po::value<bool>()->default_value(true), "ZeRO-3 builds the model partitioned")
      ("ds-config", po::value<std::string>(),
       "take stage, offload, micro-batch, precision and buckets from a ds_config (--stage, --offload, "
       "--precision and bucket flags given win; --micro-batch fills an \"auto\" one)");
  po::options_description hardware("hardware");
  hardware.add_options()
      ("gpu", po::value<std::string>()->default_value("a100-80gb"), "GPU type (see --list)")
      ("gpu-mem-gib", po::value<double>(), "GPU memory in GiB, instead of --gpu")
      ("gpus-per-node", po::value<int64_t>()->default_value(1), "GPUs per node")
      ("nodes", po::value<int64_t>()->default_value(1), "nodes")
      ("cpu-mem-gib", po::value<double>(), "host memory per node in GiB (default: not checked)")
      ("reserve-gib", po::value<double>()->default_value(1.0), "per GPU for CUDA context, NCCL, allocator");
  po::options_description tuning("ds_config values");
  tuning.add_options()
      ("reduce-bucket-size", po::value<std::string>(),
       ("elements (default: the ds_config's, " + std::to_string(est::EstimateRequest{}.reduce_bucket_size) + ")").c_str())
      ("prefetch-bucket-size", po::value<std::string>(),
       ("elements, stage 3 (default: the ds_config's, " + std::to_string(est::EstimateRequest{}.prefetch_bucket_size) + ")").c_str())
      ("buffer-factor", po::value<double>()->default_value(est::kDeepSpeedBufferFactor),
       "DeepSpeed's additional_buffer_factor for CPU figures");
  po::options_description output("output");
  output.add_options()
      ("json", po::bool_switch(), "print JSON")
      ("list", po::bool_switch(), "list model presets and GPU types");
  po::options_description all;
  all.add(model).add(run).add(hardware).add(tuning).add(output);
  return all;
}
// clang-format on

Error usage(const std::string& message) {
  return Error(ErrorKind::Usage, "dsx estimate: " + message);
}

// "7e9", "124439808", "7B", "1.3b", "500M": a positive whole number.
int64_t parse_count(const std::string& option, const std::string& text) {
  if (auto count = est::parse_param_count(text)) return *count;
  throw usage("--" + option + " '" + text +
              "' is not a positive whole number (e.g. 7e9, 7B, 1.3B or 500000000)");
}

int64_t positive(const po::variables_map& vars, const std::string& option) {
  int64_t v = vars[option].as<int64_t>();
  if (v < 1) throw usage("--" + option + " must be at least 1, got " + std::to_string(v));
  return v;
}

std::vector<std::string> split_list(const po::variables_map& vars, const std::string& option) {
  std::vector<std::string> words;
  if (!vars.count(option)) return words;
  for (const auto& arg : vars[option].as<std::vector<std::string>>()) {
    std::stringstream in(arg);
    for (std::string word; std::getline(in, word, ',');) {
      if (!word.empty()) words.push_back(word);
    }
  }
  return words;
}

est::ModelShape model_from_args(const po::variables_map& vars) {
  const bool preset = vars.count("model"), config = vars.count("hf-config"),
             shape = vars.count("layers");
  if (preset + config + shape != 1) {
    throw usage(
        "give exactly one model: --model <preset>, --hf-config <config.json>, or a shape "
        "(--layers --hidden --heads --vocab [--intermediate --kv-heads --seq-len --params])");
  }
  est::ModelShape m;
  if (preset) {
    m = est::find_model_preset(vars["model"].as<std::string>());
  } else if (config) {
    m = est::read_hf_config(vars["hf-config"].as<std::string>());
  } else {
    for (const char* need : {"hidden", "heads", "vocab"}) {
      if (!vars.count(need)) throw usage(std::string("a shape needs --") + need + " too");
    }
    const auto arch = vars["arch"].as<std::string>();
    if (arch != "gpt2" && arch != "llama")
      throw usage("--arch must be gpt2 or llama, got '" + arch + "'");
    m.name = "custom";
    m.arch = arch == "gpt2" ? est::Architecture::Gpt2 : est::Architecture::Llama;
    m.layers = vars["layers"].as<int64_t>();
    m.hidden = vars["hidden"].as<int64_t>();
    m.heads = vars["heads"].as<int64_t>();
    m.vocab = vars["vocab"].as<int64_t>();
    m.kv_heads = vars.count("kv-heads") ? vars["kv-heads"].as<int64_t>() : m.heads;
    m.intermediate = vars.count("intermediate") ? vars["intermediate"].as<int64_t>() : 4 * m.hidden;
    m.tied_embeddings = vars["tied-embeddings"].as<bool>();
    m.max_seq_len = vars.count("seq-len") ? vars["seq-len"].as<int64_t>() : 0;
  }
  if (vars.count("params"))
    m.params_override = parse_count("params", vars["params"].as<std::string>());
  est::validate(m);
  return m;
}

est::EstimateRequest request_from_args(const po::variables_map& vars) {
  est::EstimateRequest r;
  r.model = model_from_args(vars);
  r.activations.seq_len = vars.count("seq-len") ? positive(vars, "seq-len") : r.model.max_seq_len;
  if (r.activations.seq_len < 1)
    throw usage("the model names no maximum sequence length; give --seq-len");
  r.activations.micro_batch = positive(vars, "micro-batch");
  r.activations.checkpointing = vars["activation-checkpointing"].as<bool>();
  const auto attention = vars["attention"].as<std::string>();
  if (attention != "flash" && attention != "eager")
    throw usage("--attention must be flash or eager");
  r.activations.flash_attention = attention == "flash";

  const auto precision = vars["precision"].as<std::string>();
  if (precision == "bf16")
    r.precision = est::Precision::Bf16;
  else if (precision == "fp16")
    r.precision = est::Precision::Fp16;
  else if (precision == "fp32")
    r.precision = est::Precision::Fp32;
  else
    throw usage("--precision must be bf16, fp16 or fp32, got '" + precision + "'");

  r.cluster = {positive(vars, "gpus-per-node"), positive(vars, "nodes")};
  if (vars.count("gpu-mem-gib")) {
    double gib = vars["gpu-mem-gib"].as<double>();
    if (!(gib > 0)) throw usage("--gpu-mem-gib must be positive");
    r.gpu_memory_bytes = static_cast<int64_t>(gib * kGiB);
  } else {
    r.gpu_memory_bytes = est::find_gpu_type(vars["gpu"].as<std::string>()).memory_bytes;
  }
  if (vars.count("cpu-mem-gib")) {
    double gib = vars["cpu-mem-gib"].as<double>();
    if (!(gib > 0)) throw usage("--cpu-mem-gib must be positive");
    r.cpu_memory_per_node_bytes = static_cast<int64_t>(gib * kGiB);
  }
  double reserve = vars["reserve-gib"].as<double>();
  if (!(reserve >= 0)) throw usage("--reserve-gib must not be negative");
  r.reserve_bytes = static_cast<int64_t>(reserve * kGiB);
  r.zero_init = vars["zero-init"].as<bool>();
  r.buffer_factor = vars["buffer-factor"].as<double>();
  if (!(r.buffer_factor > 0)) throw usage("--buffer-factor must be positive");
  if (vars.count("reduce-bucket-size"))
    r.reduce_bucket_size = parse_count("reduce-bucket-size", vars["reduce-bucket-size"].as<std::string>());
  if (vars.count("prefetch-bucket-size"))
    r.prefetch_bucket_size = parse_count("prefetch-bucket-size", vars["prefetch-bucket-size"].as<std::string>());
  r.adapter.r = positive(vars, "lora-r");
  if (vars.count("lora-targets")) r.adapter.targets = split_list(vars, "lora-targets");
  r.adapter.double_quant = vars["double-quant"].as<bool>();
  est::lora_targets(r.model, r.adapter);  // a target that names no module is a usage error now
  return r;
}

std::vector<est::Method> methods_from_args(const po::variables_map& vars) {
  std::vector<est::Method> methods;
  for (const auto& m : split_list(vars, "method")) {
    if (m == "full")
      methods.push_back(est::Method::Full);
    else if (m == "lora")
      methods.push_back(est::Method::Lora);
    else if (m == "qlora")
      methods.push_back(est::Method::Qlora);
    else
      throw usage("--method takes full, lora or qlora, got '" + m + "'");
  }
  if (methods.empty()) methods = {est::Method::Full};
  return methods;
}

std::vector<est::ZeroOption> options_from_args(const po::variables_map& vars) {
  std::vector<int> stages;
  for (const auto& s : split_list(vars, "stage")) {
    if (s.size() != 1 || s[0] < '0' || s[0] > '3')
      throw usage("--stage takes 0, 1, 2 or 3, got '" + s + "'");
    stages.push_back(s[0] - '0');
  }
  if (stages.empty()) stages = {0, 1, 2, 3};
  std::vector<est::Offload> offloads;
  for (const auto& o : split_list(vars, "offload")) {
    if (o == "none")
      offloads.push_back(est::Offload::None);
    else if (o == "optimizer")
      offloads.push_back(est::Offload::Optimizer);
    else if (o == "param")
      offloads.push_back(est::Offload::OptimizerAndParams);
    else if (o == "nvme")
      offloads.push_back(est::Offload::OptimizerNvme);
    else if (o == "nvme-param")
      offloads.push_back(est::Offload::OptimizerAndParamsNvme);
    else
      throw usage("--offload takes none, optimizer, param, nvme or nvme-param, got '" + o + "'");
  }
  if (offloads.empty())
    offloads = {est::Offload::None, est::Offload::Optimizer, est::Offload::OptimizerAndParams,
                est::Offload::OptimizerNvme, est::Offload::OptimizerAndParamsNvme};
  auto options = est::zero_options(stages, offloads, methods_from_args(vars));
  if (options.empty())
    throw usage("no valid stage/offload pair: offload needs stage 1-3, param offload and NVMe "
                "stage 3, QLoRA stage 0-2");
  return options;
}

// The ds_config's choices, except where the command line says otherwise.
void apply_ds_config(const po::variables_map& vars, est::EstimateRequest& r,
                     std::vector<est::ZeroOption>& options) {
  std::optional<int64_t> micro_batch;
  if (!vars["micro-batch"].defaulted()) micro_batch = r.activations.micro_batch;
  const auto c = est::read_ds_config_choices(vars["ds-config"].as<std::string>(),
                                             r.cluster.total_gpus(), r.model.hidden, micro_batch);
  if (!vars.count("stage") && !vars.count("offload")) {
    // The file's stage and offload, for each --method asked (adapter rows come unoffloaded).
    options = est::zero_options({c.option.stage}, {c.option.offload}, methods_from_args(vars));
    if (options.empty()) options = {c.option};
  }
  if (vars["micro-batch"].defaulted()) r.activations.micro_batch = c.micro_batch;
  if (vars["precision"].defaulted()) r.precision = c.precision;
  if (!vars.count("reduce-bucket-size")) r.reduce_bucket_size = c.reduce_bucket_size;
  if (!vars.count("prefetch-bucket-size")) r.prefetch_bucket_size = c.prefetch_bucket_size;
  r.overlap_comm = c.overlap_comm;
  r.sub_group_size = c.sub_group_size;
  r.optimizer_buffer_count = c.optimizer_buffer_count;
  r.param_buffer_count = c.param_buffer_count;
  r.param_buffer_size = c.param_buffer_size;
}

struct Row {
  est::MemoryEstimate estimate;
  std::optional<est::Cluster> fewest;
  int64_t floor_per_gpu = 0;  // no cluster fits: what one GPU still holds at the largest size tried
};

// The fewest GPUs that fit, and when none does, why more would not help.
Row row_for(const est::EstimateRequest& request, est::ZeroOption option) {
  Row row{est::estimate_memory(request, option), est::fewest_gpus(request, option, kMostGpus), 0};
  if (!row.fewest) {
    est::EstimateRequest largest = request;
    const int64_t per_node = request.cluster.gpus_per_node;
    largest.cluster = est::Cluster{per_node, std::max<int64_t>(1, kMostGpus / per_node)};
    row.floor_per_gpu = est::estimate_memory(largest, option).gpu_total();
  }
  return row;
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / kGiB);
  return text;
}

std::string cluster_text(const Row& row) {
  const std::optional<est::Cluster>& c = row.fewest;
  if (!c) return "never: >= " + gib(row.floor_per_gpu) + " GiB per GPU however many";
  return std::to_string(c->total_gpus()) + " (" + std::to_string(c->gpus_per_node) + "x" +
         std::to_string(c->nodes) + ")";
}

// "lora r=8 (2)": the rank and how many linears of a block carry adapters.
std::string method_text(const est::EstimateRequest& r, est::ZeroOption option) {
  if (option.method == est::Method::Full) return to_string(option.offload);
  return std::string(to_string(option.method)) + " r=" + std::to_string(r.adapter.r) + " (" +
         std::to_string(est::lora_targets(r.model, r.adapter).size()) + ")";
}

// The answers people give for a 7B model, beside this model's own figures: full fine-tuning's
// model states in all (16 bytes a parameter: 16-bit weights and grads, fp32 master, Adam m and
// v; "about 100 GB" for 7B, so 2 x A100 80GB or 4 x A100 40GB) and QLoRA on one 24 GB card.
void print_common_answers(const est::EstimateRequest& r, const std::vector<Row>& rows) {
  const double params = static_cast<double>(est::parameter_count(r.model));
  std::printf("\nBeside the common answers (for a 7B model: full bf16 fine-tuning ~100 GB in all, "
              "2x A100 80GB or 4x A100 40GB; QLoRA on one 24 GB GPU):\n");
  std::printf("  full fine-tuning, model states in all GPUs (16 B/param): %.1f GB\n",
              16.0 * params / 1e9);
  const Row* best_full = nullptr;  // the fewest GPUs without offload
  for (const auto& row : rows) {
    const auto& o = row.estimate.option;
    if (o.method != est::Method::Full || o.offload != est::Offload::None || !row.fewest) continue;
    if (!best_full || row.fewest->total_gpus() < best_full->fewest->total_gpus()) best_full = &row;
  }
  if (best_full)
    std::printf("  full fine-tuning without offload: fewest %s at stage %d\n",
                cluster_text(*best_full).c_str(), best_full->estimate.option.stage);
  for (const auto& row : rows) {
    if (row.estimate.option.method == est::Method::Full) continue;
    std::printf("  %s at stage %d: %.1f GB per GPU, %lld trainable params; fewest: %s\n",
                method_text(r, row.estimate.option).c_str(), row.estimate.option.stage,
                static_cast<double>(row.estimate.gpu_total()) / 1e9,
                static_cast<long long>(row.estimate.trainable_params), cluster_text(row).c_str());
  }
}

void print_table(const est::EstimateRequest& r, const std::vector<Row>& rows,
                 const std::string& ds_config) {
  const auto& m = r.model;
  if (!ds_config.empty()) std::printf("config: %s\n", ds_config.c_str());
  std::printf("model: %s (%s), %lld params, largest layer %lld params\n", m.name.c_str(),
              to_string(m.arch), static_cast<long long>(est::parameter_count(m)),
              static_cast<long long>(est::largest_layer_params(m)));
  std::printf("run:   seq %lld x micro-batch %lld, %s, %s attention, activation checkpointing %s\n",
              static_cast<long long>(r.activations.seq_len),
              static_cast<long long>(r.activations.micro_batch), to_string(r.precision),
              r.activations.flash_attention ? "flash" : "eager",
              r.activations.checkpointing ? "on" : "off");
  std::printf("setup: %lld GPU(s) per node x %lld node(s), %s GiB per GPU, CPU per node %s\n\n",
              static_cast<long long>(r.cluster.gpus_per_node),
              static_cast<long long>(r.cluster.nodes), gib(r.gpu_memory_bytes).c_str(),
              r.cpu_memory_per_node_bytes ? (gib(r.cpu_memory_per_node_bytes) + " GiB").c_str()
                                          : "not checked (--cpu-mem-gib)");
  std::printf("%-5s %-15s %12s %12s %12s %12s %12s %10s  %-4s %9s  %s\n", "stage",
              "offload/method", "states/GPU", "activations", "buf+reserve", "total/GPU",
              "CPU/node", "NVMe/node", "fits", "max mbs", "fewest GPUs that fit");
  for (const auto& row : rows) {
    const auto& e = row.estimate;
    std::printf("%-5d %-15s %12s %12s %12s %12s %12s %10s  %-4s %9lld  %s\n", e.option.stage,
                method_text(r, e.option).c_str(), gib(e.gpu_model_states).c_str(),
                gib(e.gpu_activations).c_str(), gib(e.gpu_buffers + e.gpu_reserve).c_str(),
                gib(e.gpu_total()).c_str(), gib(e.cpu_model_states).c_str(),
                e.nvme_per_node ? gib(e.nvme_per_node).c_str() : "-", e.fits() ? "yes" : "no",
                static_cast<long long>(e.max_micro_batch), cluster_text(row).c_str());
  }
  print_common_answers(r, rows);
  for (const auto& row : rows) {
    if (row.estimate.gpu_activations + row.estimate.gpu_reserve > r.gpu_memory_bytes) {
      std::printf(
          "\nActivations alone exceed the GPU: try --activation-checkpointing, a smaller "
          "--micro-batch or --seq-len.\n");
      break;
    }
  }
  std::printf(
      "\nGiB = 2^30 bytes. Model states of stages 2 and 3 (fp16/bf16) are DeepSpeed's estimator "
      "figures; docs/estimate.md explains every column.\n");
}

void write_model(JsonWriter& w, const est::ModelShape& m) {
  w.Key("model");
  w.StartObject();
  field(w, "name", m.name.c_str());
  field(w, "arch", to_string(m.arch));
  field(w, "params", est::parameter_count(m));
  field(w, "largest_layer_params", est::largest_layer_params(m));
  field(w, "layers", m.layers);
  field(w, "hidden", m.hidden);
  field(w, "heads", m.heads);
  field(w, "kv_heads", m.kv_heads);
  field(w, "vocab", m.vocab);
  field(w, "intermediate", m.intermediate);
  field(w, "tied_embeddings", m.tied_embeddings);
  w.EndObject();
}

void write_setup(JsonWriter& w, const est::EstimateRequest& r) {
  w.Key("setup");
  w.StartObject();
  field(w, "seq_len", r.activations.seq_len);
  field(w, "micro_batch", r.activations.micro_batch);
  field(w, "precision", to_string(r.precision));
  field(w, "flash_attention", r.activations.flash_attention);
  field(w, "activation_checkpointing", r.activations.checkpointing);
  field(w, "gpus_per_node", r.cluster.gpus_per_node);
  field(w, "nodes", r.cluster.nodes);
  field(w, "gpu_memory_bytes", r.gpu_memory_bytes);
  w.Key("cpu_memory_per_node_bytes");
  r.cpu_memory_per_node_bytes ? w.Int64(r.cpu_memory_per_node_bytes) : w.Null();
  field(w, "zero_init", r.zero_init);
  w.EndObject();
}

// The same for every row: where the activation bytes go.
void write_activations(JsonWriter& w, const est::EstimateRequest& r) {
  est::ActivationOptions act = r.activations;
  act.bytes_per_value = r.precision == est::Precision::Fp32 ? 4 : 2;
  const auto parts = est::activation_bytes(r.model, act);
  w.Key("activations");
  w.StartObject();
  field(w, "layers", parts.layers);
  field(w, "embedding", parts.embedding);
  field(w, "logits", parts.logits);
  field(w, "block_bytes_per_token", est::block_bytes_per_token(r.model, act));
  w.EndObject();
}

void write_row(JsonWriter& w, const Row& row) {
  const auto& e = row.estimate;
  w.StartObject();
  field(w, "stage", e.option.stage);
  const char* device = est::offloads_to_nvme(e.option.offload) ? "nvme" : "cpu";
  field(w, "method", to_string(e.option.method));
  field(w, "trainable_params", e.trainable_params);
  field(w, "offload_optimizer", e.option.offload == est::Offload::None ? "none" : device);
  field(w, "offload_param", est::offloads_params(e.option.offload) ? device : "none");
  field(w, "model_states_formula", e.model_states_formula);
  w.Key("gpu");
  w.StartObject();
  field(w, "model_states", e.gpu_model_states);
  field(w, "activations", e.gpu_activations);
  field(w, "buffers", e.gpu_buffers);
  field(w, "reserve", e.gpu_reserve);
  field(w, "total", e.gpu_total());
  w.EndObject();
  w.Key("cpu_per_node");
  w.StartObject();
  field(w, "model_states", e.cpu_model_states);
  w.EndObject();
  field(w, "nvme_per_node", e.nvme_per_node);
  field(w, "fits", e.fits());
  field(w, "max_micro_batch", e.max_micro_batch);
  w.Key("fewest_gpus");
  if (row.fewest) {
    w.StartObject();
    field(w, "gpus", row.fewest->total_gpus());
    field(w, "gpus_per_node", row.fewest->gpus_per_node);
    field(w, "nodes", row.fewest->nodes);
    w.EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
}

void print_json(const est::EstimateRequest& r, const std::vector<Row>& rows) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  write_model(w, r.model);
  write_setup(w, r);
  write_activations(w, r);
  w.Key("rows");
  w.StartArray();
  for (const auto& row : rows) write_row(w, row);
  w.EndArray();
  w.EndObject();
  std::cout << buffer.GetString() << "\n";
}

void print_lists() {
  std::cout << "model presets:\n";
  for (const auto& p : est::model_presets()) {
    std::printf("  %-12s %-58s %14lld params\n", p.name, p.description,
                static_cast<long long>(est::parameter_count(p.shape)));
  }
  std::cout << "GPU types:\n";
  for (const auto& t : est::gpu_types()) {
    std::printf("  %-12s %-40s %8.2f GiB\n", t.name, t.description,
                static_cast<double>(t.memory_bytes) / kGiB);
  }
}

}  // namespace

int run_estimate(int argc, char** argv) {
  auto args =
      parse_args(argc, argv,
                 "dsx estimate (--model NAME | --hf-config FILE | --layers N --hidden N --heads N "
                 "--vocab N) [options]",
                 estimate_options());
  if (args.help) return 0;
  const auto& vars = args.vars;
  if (vars["list"].as<bool>()) {
    print_lists();
    return 0;
  }
  auto request = request_from_args(vars);
  auto options = options_from_args(vars);
  if (vars.count("ds-config")) apply_ds_config(vars, request, options);
  est::validate(request);
  std::vector<Row> rows;
  for (const auto& option : options) {
    rows.push_back(row_for(request, option));
  }
  if (vars["json"].as<bool>()) {
    print_json(request, rows);
  } else {
    print_table(request, rows, vars.count("ds-config") ? vars["ds-config"].as<std::string>() : "");
  }
  return 0;
}

}  // namespace dsx::tools
