// The list of subcommands. Add a line here when you add a tools/cmd_<name>.cpp.
#include "tools/command.h"

#include <array>

namespace dsx::tools {

int run_version(int argc, char** argv);
int run_checkpoint(int argc, char** argv);
int run_train(int argc, char** argv);
int run_export(int argc, char** argv);
int run_sample(int argc, char** argv);
int run_cloud(int argc, char** argv);
int run_config(int argc, char** argv);
int run_launch(int argc, char** argv);
int run_torchrun(int argc, char** argv);
int run_estimate(int argc, char** argv);
int run_report(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_autotune(int argc, char** argv);
int run_trace(int argc, char** argv);
int run_tokenize(int argc, char** argv);

std::span<const Command> commands() {
  static const std::array table = {
      Command{"train", "train a model with a ds_config (ZeRO 0-3) on every rank of a job", run_train},
      Command{"export", "one consolidated safetensors file (fp32/bf16) from a training checkpoint", run_export},
      Command{"version", "print the dsx version and build options", run_version},
      Command{"sample", "generate text or answers from GPT-2 weights (llm.c .bin or safetensors)", run_sample},
      Command{"config", "check a DeepSpeed ds_config: every effective value and its source", run_config},
      Command{"launch", "start a program on every slot of every host (deepspeed launcher drop-in)", run_launch},
      Command{"torchrun", "torchrun's command line: one launch per node, a rendezvous, restarts", run_torchrun},
      Command{"estimate", "memory per GPU and CPU for each ZeRO stage; fewest GPUs that fit", run_estimate},
      Command{"autotune", "fastest ZeRO stage and micro-batch split that fits, by trial runs; writes the ds_config", run_autotune},
      Command{"report", "versions, GPUs and topology, fabric providers; checks with advice", run_report},
      Command{"bench", "benchmarks: `dsx bench comm` times collectives like nccl-tests", run_bench},
      Command{"tokenize", "text and JSONL files to llm.c token shards through a Hugging Face tokenizer", run_tokenize},
      Command{"trace", "join the per-rank timelines of `dsx train --profile DIR` into one file", run_trace},
      Command{"checkpoint", "list a save directory's checkpoints; verify one's files (sizes, CRC32C)", run_checkpoint},
      Command{"cloud", "AWS p4d/p5 and GCP a2/a3 clusters: render, up, status, hostfile, down", run_cloud},
  };
  return table;
}

}  // namespace dsx::tools
