// `dsx train` as a library call: one rank of a training job from start to finish. It meets the
// other ranks (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, as set by `dsx launch`, torchrun or
// the deepspeed launcher; a lone process when they are absent), reads the ds_config, builds the
// model and this rank's data, trains with ZeRO, and on rank 0 shows progress, DeepSpeed's log
// lines, the monitors' files, held-out accuracy, the saved checkpoint and samples. With
// `autotuning.enabled` and `autotuning.metric_path` in the config it is a profiled trial, as
// under DeepSpeed's autotuner: it stops after end_profile_step and writes the metrics file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dsx::engine {

struct TrainRunOptions {
  std::string config_path;              // --deepspeed_config
  std::string model = "byte-tiny";      // a preset, a GPT-2 weights file or a Hugging Face model folder
  std::string lora;                     // --lora: train LoRA adapters (models/lora/lora_config.h), "" for all weights
  bool load_in_4bit = false;             // --load-in-4bit: QLoRA, the --model folder quantised to NF4 at load
  bool bnb_double_quant = false;         // --bnb-4bit-use-double-quant
  std::string bnb_compute_dtype = "float32";  // --bnb-4bit-compute-dtype (BitsAndBytesConfig's default)
  std::string data = "addition";        // "addition", "text:FILE", "jsonl:FILE", "shards:GLOB"
  int seq_len = 0;                      // --seq_len: tokens per row (0: the model's maximum)
  std::string tokenizer;                // --tokenizer DIR: text's tokenizer ("": the model folder's, else bytes)
  int digits = 2;                       // the addition task's operand digits
  int64_t steps = 300;                  // optimizer steps
  int64_t epochs = 0;                   // > 0: passes over the data instead of --steps
  int64_t eval_interval = 100;          // held-out evaluation every N steps (0: only at the end)
  int eval_samples = 200;
  uint64_t seed = 1234;
  std::string save_dir;                 // --save: checkpoint at the end (and every save_interval)
  int64_t save_interval = 0;
  std::string load_dir;                 // --load: resume from a checkpoint
  std::string load_tag;                 // --tag (default: the `latest` file)
  int samples_to_show = 5;              // answers printed at the end (addition task)
  bool strict_config = false;
  std::string device = "auto";          // --device: auto | cpu | cuda
  size_t device_memory = 0;             // --device_memory: bytes a rank may hold (0: no limit)
  std::optional<std::string> progress;  // "auto" (default), "bar", "plain"
  int64_t max_nonfinite_steps = 3;      // end the run after this many steps with a NaN/inf loss (0: never)
  std::string profile_dir;              // --profile: per-rank timelines (docs/profiling.md)
  std::optional<std::string> profile_schedule;  // --profile_schedule wait,warmup,active[,repeat]
  // What fills a Hugging Face config's "auto" values, as `dsx config check` takes them.
  std::optional<int64_t> micro_batch;   // --micro-batch
  std::optional<int64_t> grad_accum;    // --grad-accum
  std::optional<double> learning_rate;  // --lr
  std::optional<int64_t> warmup_steps;  // --warmup-steps
};

// Returns the process exit code; throws dsx::Error for what the user must fix.
int run_training(const TrainRunOptions& options);

}  // namespace dsx::engine
