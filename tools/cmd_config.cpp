// `dsx config check FILE`: reads a DeepSpeed ds_config as dsx will train with it and prints every
// effective value with where it came from (file line:column, default, derived, auto), then the
// warnings; or the errors (exit 1). --json prints the values as one flat object of dotted keys,
// which tools/compat/ds_config_compat.py compares with DeepSpeed's own reading.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstring>
#include <iostream>

#include "dsx/error.h"
#include "engine/arrangement.h"
#include "config/ds_config.h"
#include "engine/training_setup.h"
#include "tools/cli.h"

namespace dsx::tools {

namespace {

constexpr const char* kUsage =
    "dsx config check FILE [--world-size N] [--hidden-size H] [--micro-batch M] [--grad-accum G]\n"
    "                        [--lr LR] [--total-steps N] [--warmup-steps N] [--strict] [--json]";

std::string describe(const config::Origin& origin) {
  std::string s = config::to_string(origin.source);
  if (origin.pos.line > 0) s += " " + std::to_string(origin.pos.line) + ":" + std::to_string(origin.pos.column);
  if (!origin.note.empty()) s += " (" + origin.note + ")";
  return s;
}

void print_text(const std::string& file, const config::EngineConfig& config) {
  auto entries = config::flatten(config);
  size_t key_width = 0, value_width = 0;
  for (const auto& e : entries) {
    key_width = std::max(key_width, e.path.size());
    value_width = std::max(value_width, std::min<size_t>(e.value.size(), 24));
  }
  std::cout << file << ": valid; data-parallel world size " << config.dp_world_size << "\n\n";
  for (const auto& e : entries) {
    std::cout << "  " << e.path << std::string(key_width - e.path.size() + 2, ' ') << e.value;
    std::cout << std::string(e.value.size() < value_width ? value_width - e.value.size() + 2 : 2, ' ')
              << describe(e.origin) << "\n";
  }
  // What dsx train will say at start about how it runs this config (ignored keys, offload on the CPU).
  std::vector<std::string> notes;
  engine::zero_options_from(config, notes);
  for (bool gpu : {false, true}) {
    if (std::string note = engine::precision_note(config, gpu); !note.empty()) notes.push_back(note);
  }
  // Where ZeRO's state would live, on CPU ranks and on GPUs (dsx train prints its own).
  for (bool gpu : {false, true}) {
    engine::ArrangementInputs in;
    in.model_on_gpu = gpu;
    in.offload_optimizer = config.zero_optimization.optimizer_offloaded();
    in.offload_param = config.zero_optimization.params_offloaded();
    in.device_resident_supported = true;  // what a GPU run does: GPUs need a CUDA build, which has it
    notes.push_back(std::string(gpu ? "on GPUs: " : "on CPU ranks: ") + engine::choose_arrangement(in).summary);
  }
  std::cout << "\nnotes (dsx train prints them at start):\n";
  for (const auto& note : notes) std::cout << "  " << note << "\n";
  if (config.warnings.empty()) return;
  std::cout << "\n" << config.warnings.size() << (config.warnings.size() == 1 ? " warning" : " warnings")
            << " (--strict makes them errors):\n";
  for (const auto& w : config.warnings) {
    std::cout << "  " << file;
    if (w.pos.line > 0) std::cout << ":" << w.pos.line << ":" << w.pos.column;
    std::cout << ": " << w.path << ": " << w.message << "\n";
  }
}

void print_json(const config::EngineConfig& config) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  for (const auto& e : config::flatten(config)) {
    w.Key(e.path.c_str(), static_cast<rapidjson::SizeType>(e.path.size()));
    w.RawValue(e.value.c_str(), e.value.size(), rapidjson::kObjectType);
  }
  w.EndObject();
  std::cout << buffer.GetString() << "\n";
  for (const auto& w : config.warnings)  // stdout stays one JSON object
    std::cerr << "warning: " << w.path << ": " << w.message << "\n";
}

int run_check(int argc, char** argv) {
  po::options_description options("options");
  options.add_options()
      ("file", po::value<std::string>(), "the ds_config JSON file")
      ("world-size", po::value<int64_t>()->default_value(1), "number of ranks (GPUs or processes)")
      ("hidden-size", po::value<int64_t>(), "the model's hidden size, for \"auto\" bucket sizes")
      ("micro-batch", po::value<int64_t>(), "per-rank micro batch (fills \"auto\")")
      ("grad-accum", po::value<int64_t>(), "gradient accumulation steps (fills \"auto\")")
      ("lr", po::value<double>(), "learning rate (fills \"auto\"; default 5e-5 as Hugging Face)")
      ("total-steps", po::value<int64_t>(), "training steps (fills \"auto\" total_num_steps)")
      ("warmup-steps", po::value<int64_t>(), "warmup steps (fills \"auto\" warmup_num_steps)")
      ("strict", "treat every warning as an error")
      ("json", "print the effective values as one JSON object of dotted keys");
  po::positional_options_description positional;
  positional.add("file", 1);
  auto args = parse_args(argc, argv, kUsage, options, &positional);
  if (args.help) return 0;
  const auto& vars = args.vars;
  if (!vars.count("file")) throw Error(ErrorKind::Usage, "dsx config check: give the config FILE (see --help)");
  config::ConfigInputs inputs;
  inputs.world_size = vars["world-size"].as<int64_t>();
  if (vars.count("hidden-size")) inputs.hidden_size = vars["hidden-size"].as<int64_t>();
  if (vars.count("micro-batch")) inputs.micro_batch = vars["micro-batch"].as<int64_t>();
  if (vars.count("grad-accum")) inputs.grad_accum = vars["grad-accum"].as<int64_t>();
  if (vars.count("lr")) inputs.learning_rate = vars["lr"].as<double>();
  if (vars.count("total-steps")) inputs.total_steps = vars["total-steps"].as<int64_t>();
  if (vars.count("warmup-steps")) inputs.warmup_steps = vars["warmup-steps"].as<int64_t>();
  inputs.strict = vars.count("strict") > 0;
  const std::string file = vars["file"].as<std::string>();
  config::EngineConfig config = config::read_ds_config_file(file, inputs);
  if (vars.count("json")) print_json(config);
  else print_text(file, config);
  return 0;
}

}  // namespace

int run_config(int argc, char** argv) {
  if (argc < 2) {
    std::cout << "usage: dsx config check FILE [options]    read a ds_config, print every effective value\n"
                 "       dsx config --help                  the options\n";
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    // The one verb's help, options and all: `dsx config --help` hides nothing.
    std::cout << "dsx config check: read a ds_config as DeepSpeed does and print every effective value\n\n";
    std::string prog = "dsx config check", help = "--help";
    char* check_help[] = {prog.data(), help.data(), nullptr};
    return run_check(2, check_help);
  }
  if (std::strcmp(argv[1], "check") != 0) {
    throw Error(ErrorKind::Usage, std::string("dsx config: unknown verb '") + argv[1] + "'; the verb is 'check' (see --help)");
  }
  std::string prog = "dsx config check";
  argv[1] = prog.data();
  return run_check(argc - 1, argv + 1);
}

}  // namespace dsx::tools
