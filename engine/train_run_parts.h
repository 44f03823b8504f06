// The pieces `dsx train` (engine/train_run.cpp) is set up from and ends with: the rank's
// environment, the model and data it trains, where ZeRO lives, what a checkpoint records about
// the run, an autotuning trial's metrics and the closing summary's rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/rendezvous.h"
#include "comm/store/store.h"
#include "config/ds_config.h"
#include "engine/monitor/monitor_master.h"
#include "engine/progress/progress_display.h"
#include "engine/train_run.h"
#include "engine/trainer.h"
#include "models/data/addition.h"
#include "models/data/loader.h"
#include "models/model_source.h"

namespace dsx::engine {

// Seconds on the steady clock.
double now_seconds();

// The rank environment of a launcher, or a job of one when there is none.
comm::RankEnv rank_env();

monitor::MonitorSettings monitor_settings(const config::EngineConfig& c);

// The model: a preset trained from scratch, or weights from a file or folder to fine-tune.
models::ModelSource choose_model(const TrainRunOptions& o);

// This rank's share of --data: the addition task, text:FILE or shards:GLOB.
std::unique_ptr<models::DataLoader> make_loader(const TrainRunOptions& o, const models::ModelSource& model,
                                                const models::AdditionTask& task, int micro_batch, int seq_len,
                                                int rank, int world);

// What a checkpoint keeps about the run besides the tensors: the model's shape and the folder it
// came from (for dsx export and its tokenizer files), the seed (data order and initial weights;
// training itself draws no random numbers) and the ds_config as written.
std::string run_description(const models::ModelSource& model, uint64_t seed, const std::string& config_path);

// Under DeepSpeed's autotuner the engine times steps (start_profile_step, end_profile_step],
// writes the metrics file and ends the run; dsx adds the most memory any rank held.
// `spread`: the timed steps' relative standard deviation (ProfileWindow::spread).
void write_trial_metrics(const config::EngineConfig& config, Trainer& trainer, const models::Model& model,
                         int seq, int64_t profiled_steps, double seconds,
                         double spread, comm::Store& store, int rank, int world, size_t memory_limit);

// The closing summary's rows of what rank 0 held and how much gradient traffic it sent.
void add_resource_rows(progress::RunSummary& summary, zero::ZeroEngine& zero, int ranks);

// Greedy answers of the trained model to sums it never trained on, computed on the host.
void print_samples(const models::ModelShape& shape, const std::vector<float>& weights, const models::AdditionTask& task,
                   int seq, uint64_t seed, int count);

// Creates `dir` if need be and writes and removes a file there; Error(Io) naming `flag`, the
// directory and the reason when that fails - before any training time is spent.
void require_writable_directory(const std::string& dir, const std::string& flag);

// The ranks on this node, as the launcher (dsx, deepspeed, torchrun) says; 1 when it does not.
int local_ranks();

// --device: "cpu", "cuda", or "auto" (the GPU where the build has CUDA, one is visible and the
// model's family has CUDA kernels).
bool wants_cuda(const std::string& device, const models::ModelShape& shape);

}  // namespace dsx::engine
