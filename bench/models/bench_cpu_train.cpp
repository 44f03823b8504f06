// Training throughput of a CPU model (a GPT-2 or Llama-family preset): forward + backward + AdamW
// steps on random tokens, best step time over --steps after --warmup (the least disturbed by other
// load). Prints one JSON line for run_cpu_train.sh, which puts it beside transformers' model of the
// same shape (eager and torch.compile) measured in the same run.
// AdamW is the fused CPU kernel of kernels/optimizers.h, one call per parameter tensor (decay on
// matrices only, as the engine does). With --lora the model is the preset's frozen base with LoRA
// adapters (models/lora/): only the adapters get gradients and AdamW steps.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>
#include <vector>

#include <omp.h>
#include <sys/resource.h>

#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/optimizers.h"
#include "models/local_params.h"
#include "models/lora/lora_factory.h"
#include "models/model_source.h"
#include "tools/cli.h"

using namespace dsx::models;

namespace {

int run(int argc, char** argv) try {
  namespace po = boost::program_options;
  po::options_description options("bench_cpu_train");
  options.add_options()
      ("preset", po::value<std::string>()->default_value("gpt2-bench"), "a GPT-2 or Llama-family preset (gpt2-bench, llama-bench, ...)")
      ("batch", po::value<int>()->default_value(4), "B")
      ("seq", po::value<int>()->default_value(256), "T")
      ("warmup", po::value<int>()->default_value(2), "untimed steps")
      ("steps", po::value<int>()->default_value(5), "timed steps")
      ("checkpointing", po::bool_switch(), "activation checkpointing")
      ("lora", po::value<std::string>(), "train LoRA adapters on the frozen preset (dsx train's --lora form)")
      ("bf16", po::bool_switch(), "bf16 GEMMs, as ds_config bf16 on CPU ranks")
      ("name", po::value<std::string>()->default_value("dsx"), "the row's name in the table");
  auto args = dsx::tools::parse_args(argc, argv, "bench_cpu_train [options]", options);
  if (args.help) return 0;
  const auto& v = args.vars;
  const int B = v["batch"].as<int>(), T = v["seq"].as<int>();
  const ModelShape shape = load_model_source(v["preset"].as<std::string>()).shape;
  BuildOptions build;
  build.max_batch = B, build.max_seq = T, build.activation_checkpointing = v["checkpointing"].as<bool>();
  build.cpu_bf16_gemms = v["bf16"].as<bool>();
  const auto built = v.count("lora") ? std::unique_ptr<Model>(make_lora_model(shape, initial_parameters(shape, 1),
                                                                              parse_lora_flag(v["lora"].as<std::string>()),
                                                                              build))
                                     : build_model(shape, build);
  Model& model = *built;
  LocalParams<float> p(model);
  model.init_params(p.params(), 1);
  const int vocab = shape.vocab_size();
  std::vector<float> m(p.size(), 0.0f), s(p.size(), 0.0f);
  std::mt19937_64 rng(2);
  std::vector<int32_t> x(B * T), y(B * T);
  for (auto& t : x) t = static_cast<int32_t>(rng() % vocab);
  for (auto& t : y) t = static_cast<int32_t>(rng() % vocab);
  dsx::kernels::AdamHyper decay{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, true, true}, no_decay = decay;
  no_decay.weight_decay = 0.0f;

  // Wall time per step, and the CPU time the process used for it (all threads): on a shared,
  // loaded machine the second barely depends on how often the scheduler ran us.
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  };
  std::vector<double> times, cpu_times;
  float loss = 0;
  const int warmup = v["warmup"].as<int>(), steps = v["steps"].as<int>();
  for (int step = 1; step <= warmup + steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_now();
    loss = model.forward(x.data(), y.data(), B, T, p);
    p.zero_grads();
    model.backward(p, p, 1.0f);
    for (const auto& spec : model.params())
      dsx::kernels::adam_step(spec.decay ? decay : no_decay, step, 1.0f, p.params() + spec.offset,
                              p.grads() + spec.offset, m.data() + spec.offset, s.data() + spec.offset, spec.numel);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step > warmup) times.push_back(dt), cpu_times.push_back(cpu_now() - c0);
  }
  double best = *std::min_element(times.begin(), times.end());
  double best_cpu = *std::min_element(cpu_times.begin(), cpu_times.end());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // peak resident set, the per-rank memory figure
  std::printf("{\"impl\": \"%s\", \"threads\": %d, \"params\": %zu, \"step_s\": %.4f, \"cpu_s\": %.4f, "
              "\"tokens_per_s\": %.1f, \"loss\": %.4f, \"peak_rss_mib\": %.1f, \"blas\": \"%s\"}\n",
              v["name"].as<std::string>().c_str(), omp_get_max_threads(), model.num_params(), best, best_cpu,
              B * T / best, loss, usage.ru_maxrss / 1024.0, dsx::kernels::cpu::blas_description());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cpu_train: %s\n", e.what());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  dsx::kernels::cpu::run_on_the_best_blas_kernels(argv);  // as dsx itself does
  return run(argc, argv);
}
