// `dsx train`: DeepSpeed-style flags in, a training run out (engine/train_run.h does the work).
#include <cstdlib>

#include "engine/train_run.h"
#include "tools/cli.h"
#include "tools/rank_signals.h"

namespace dsx::tools {
namespace {

// A job its launcher restarted (torchrun's TORCHELASTIC_RESTART_COUNT > 0, `dsx launch
// --max_restarts`) resumes from its own --save without --load: from the newest checkpoint every
// node holds and that verifies. A first start never does, so that a new run given an old
// --save directory trains from scratch as it asked.
void resume_from_save_after_restart(engine::TrainRunOptions& o) {
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (!o.load_dir.empty() || o.save_dir.empty() || !restarts || std::atoi(restarts) <= 0) return;
  o.load_dir = o.save_dir;
}

}  // namespace

int run_train(int argc, char** argv) {
  end_promptly_on_signals();  // first: before any thread starts
  engine::TrainRunOptions o;
  po::options_description options("dsx train");
  options.add_options()
      ("deepspeed_config", po::value(&o.config_path), "the ds_config file (configs/ has ready ones)")
      ("deepspeed", po::bool_switch(), "accepted for DeepSpeed scripts' sake (dsx always trains with it)")
      ("local_rank", po::value<int>(), "set by launchers; dsx reads LOCAL_RANK from the environment")
      ("model", po::value(&o.model)->default_value(o.model),
       "a preset (byte-tiny, byte-small, gpt2-124M, llama-tiny, ...), a Hugging Face model folder to fine-tune "
       "(Llama, Mistral, Qwen2, GPT-2) or GPT-2 weights (.bin / .safetensors)")
      ("lora", po::value(&o.lora),
       "train LoRA adapters on the frozen --model: PEFT's adapter_config.json (or its folder; an "
       "adapter_model.safetensors there is the starting adapter), or r=8,alpha=16,dropout=0.05,targets=q_proj,v_proj "
       "(targets: names, all-linear or /regex/; also rslora=, init=, bias=)")
      ("load-in-4bit", po::bool_switch(&o.load_in_4bit),
       "QLoRA: quantise the --model folder's block linears to NF4 at load and train --lora on them (a folder "
       "saved with bitsandbytes 4-bit is QLoRA without this flag); docs/lora.md")
      ("bnb-4bit-use-double-quant", po::bool_switch(&o.bnb_double_quant),
       "with --load-in-4bit: quantise the absmax too (8-bit, blocks of 256)")
      ("bnb-4bit-compute-dtype", po::value(&o.bnb_compute_dtype)->default_value(o.bnb_compute_dtype),
       "with --load-in-4bit: bfloat16 | float16 | float32, what the dequantised weights are rounded to")
      ("data", po::value(&o.data)->default_value(o.data),
       "addition | text:FILE (through the model folder's tokenizer, else bytes) | jsonl:FILE (prompt/response "
       "pairs, loss on the responses) | shards:GLOB (llm.c token shards)")
      ("seq_len", po::value(&o.seq_len)->default_value(0),
       "tokens per training row; text is packed into rows of this length with EOS between documents (0: the "
       "model's maximum)")
      ("tokenizer", po::value(&o.tokenizer), "a Hugging Face tokenizer folder for text: and jsonl: data (default: the "
       "model folder's)")
      ("digits", po::value(&o.digits)->default_value(o.digits), "digits of the addition task's operands")
      ("steps", po::value(&o.steps)->default_value(o.steps), "optimizer steps to train")
      ("epochs", po::value(&o.epochs)->default_value(0), "passes over text/shard data (instead of --steps)")
      ("eval_interval", po::value(&o.eval_interval)->default_value(o.eval_interval),
       "held-out evaluation every N steps (0: only at the end)")
      ("eval_samples", po::value(&o.eval_samples)->default_value(o.eval_samples), "held-out examples per evaluation")
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed of the initial weights and the data order")
      ("save", po::value(&o.save_dir), "directory for the checkpoint and the final weights")
      ("save_interval", po::value(&o.save_interval)->default_value(0), "also checkpoint every N steps")
      ("load", po::value(&o.load_dir), "resume from the checkpoint in this directory")
      ("tag", po::value(&o.load_tag), "the checkpoint tag to load (default: what `latest` names)")
      ("samples", po::value(&o.samples_to_show)->default_value(o.samples_to_show), "answers to show at the end")
      ("strict", po::bool_switch(&o.strict_config), "treat every config warning as an error")
      ("device", po::value(&o.device)->default_value(o.device),
       "auto | cpu | cuda: where the model computes (auto: the GPU in a CUDA build with one visible); on a GPU "
       "ZeRO's state is in GPU memory, or in host memory with offload_optimizer/offload_param")
      ("device_memory", po::value<std::string>(),
       "bytes one rank may hold (model states, buffers, activations), e.g. 2GiB; past it the run stops with "
       "an out-of-memory error, as on a GPU of that size (default: DSX_DEVICE_MEMORY, else no limit)")
      ("progress", po::value<std::string>(), "auto | bar | plain (auto: a bar on a terminal)")
      ("micro-batch", po::value<int64_t>(), "fills an \"auto\" train_micro_batch_size_per_gpu (Hugging Face's "
       "per_device_train_batch_size)")
      ("grad-accum", po::value<int64_t>(), "fills an \"auto\" gradient_accumulation_steps")
      ("lr", po::value<double>(), "fills \"auto\" learning rates (default 5e-5, as Hugging Face)")
      ("warmup-steps", po::value<int64_t>(), "fills an \"auto\" warmup_num_steps")
      ("max_nonfinite_steps", po::value(&o.max_nonfinite_steps)->default_value(o.max_nonfinite_steps),
       "end the run with an error once the loss has been NaN or inf for N consecutive steps (0: never)")
      ("profile", po::value(&o.profile_dir), "write each rank's timeline to DIR/rank<r>.trace.json (Perfetto, "
       "chrome://tracing, TensorBoard) and print a per-phase summary over the ranks; see docs/profiling.md")
      ("profile_schedule", po::value<std::string>(), "wait,warmup,active[,repeat]: the steps --profile records, "
       "as torch.profiler's schedule (default 1,1,3,1)");
  auto args = parse_args(argc, argv, "dsx train --deepspeed_config FILE [options]", options);
  if (args.help) return 0;
  if (args.vars.count("profile_schedule")) o.profile_schedule = args.vars["profile_schedule"].as<std::string>();
  if (args.vars.count("progress")) o.progress = args.vars["progress"].as<std::string>();
  if (args.vars.count("micro-batch")) o.micro_batch = args.vars["micro-batch"].as<int64_t>();
  if (args.vars.count("grad-accum")) o.grad_accum = args.vars["grad-accum"].as<int64_t>();
  if (args.vars.count("lr")) o.learning_rate = args.vars["lr"].as<double>();
  if (args.vars.count("warmup-steps")) o.warmup_steps = args.vars["warmup-steps"].as<int64_t>();
  if (args.vars.count("device_memory")) {
    o.device_memory = parse_byte_size(args.vars["device_memory"].as<std::string>(), "dsx train: --device_memory");
  } else if (const char* env = std::getenv("DSX_DEVICE_MEMORY"); env && *env) {
    o.device_memory = parse_byte_size(env, "dsx train: DSX_DEVICE_MEMORY");
  }
  resume_from_save_after_restart(o);
  return engine::run_training(o);
}

}  // namespace dsx::tools
