// The training loop of one rank, as DeepSpeed's engine runs it: each train_batch() runs
// gradient_accumulation_steps micro-batches through the model and ZeRO, then one optimizer step
// at the accumulation boundary with the scheduler's learning rate; overflow-skipped steps do not
// advance the schedule. Progress display, monitors and checkpoints are the driver's business
// (tools/cmd_train.cpp); the Trainer says what happened in each step. A GPU model trains with ZeRO
// on its device (every buffer in GPU memory, the model computing on the device's compute stream),
// or, given no device, through a DeviceBridge: ZeRO's state in host memory (ZeRO-Offload). With
// ZeRO on a GPU the loss stays there too: each micro-batch's mean is added up on the device, the
// step's sum over ranks is a device collective, and the host reads it from pinned memory after
// the optimizer step's one synchronisation, so a step waits for the GPU once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"
#include "device/owned_memory.h"
#include "config/ds_config.h"
#include "engine/device_bridge.h"
#include "engine/schedule/lr_schedule.h"
#include "engine/zero_model_access.h"
#include "models/data/loader.h"
#include "models/model.h"
#include "zero/zero_engine.h"

namespace dsx::engine {

struct TrainStep {
  int64_t global_step = 0;  // after this step (DeepSpeed's global_steps)
  double loss = 0;          // mean over micro-batches and ranks
  double lr = 0;            // the learning rate this step used
  zero::StepResult zero;
  double forward_seconds = 0, backward_seconds = 0, step_seconds = 0, total_seconds = 0;
  int64_t samples = 0;  // train_batch_size
  int64_t tokens = 0;   // samples * tokens per sample (all ranks)
};

class Trainer {
 public:
  // `initial` parameters in the model's flat layout (every rank the same). `memory_limit`: the
  // bytes this rank may hold, model activations included (0: no limit); past it the constructor
  // or a step throws Error(OutOfMemory). `device`: where ZeRO keeps its state - the device the
  // model computes on, whose compute stream the model uses; null: ZeRO in host memory, with a
  // DeviceBridge in front of a GPU model.
  Trainer(const config::EngineConfig& config, models::Model& model, comm::Communicator& comm, const float* initial,
          size_t memory_limit = 0, device::Device* device = nullptr);

  TrainStep train_batch(models::DataLoader& loader);

  zero::ZeroEngine& zero() { return *zero_; }
  // Where the model reads its parameters: ZeRO directly, or the DeviceBridge (ZeRO-Offload).
  models::ParamAccess& params();
  // The master parameters changed outside a step (a checkpoint load): GPU copies refresh.
  void params_changed();
  const std::vector<std::string>& notes() const { return notes_; }
  int64_t global_steps() const { return global_steps_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t micro_steps() const { return micro_steps_; }
  // The scheduler's iteration (-1 before the first applied step), for checkpoints.
  int64_t schedule_iteration() const { return schedule_iteration_; }
  void restore_counters(int64_t global_steps, int64_t skipped_steps, int64_t micro_steps, int64_t schedule_iteration);
  // The learning rate (and momentum) the next applied step will use.
  zero::StepHyper next_hyper() const;
  // The momentum DeepSpeed logs beside the lr: Adam's (beta1, beta2), SGD's momentum, or none.
  std::vector<double> momentum() const;

 private:
  // The loss on the device (see the top): micro-step j's mean loss added into the step's stats.
  void add_device_loss(int j, int gas);
  // The step's [mean loss, tokens], summed over the ranks: enqueued before the optimizer step,
  // read after it.
  void enqueue_step_stats(int64_t tokens);
  std::array<float, 2> step_stats(double loss_sum, int64_t tokens);

  const config::EngineConfig config_;  // a copy: a caller may pass a temporary
  models::Model& model_;
  comm::Communicator& comm_;
  std::vector<std::string> notes_;
  std::unique_ptr<zero::ZeroEngine> zero_;
  ZeroModelAccess access_;
  std::unique_ptr<DeviceBridge> bridge_;  // GPU models with ZeRO in host memory only
  std::optional<LrSchedule> schedule_;
  models::Batch batch_;
  int64_t global_steps_ = 0, skipped_steps_ = 0, micro_steps_ = 0;
  int64_t schedule_iteration_ = -1;
  bool loss_on_device_ = false;
  zero::MemoryLedger stats_ledger_;    // the few bytes below, apart from ZeRO's exact counts
  zero::Buffer<float> device_stats_;    // [mean loss, tokens] on ZeRO's device
  device::OwnedMemory stats_in_;   // pinned: the tokens the host hands the device
  device::OwnedMemory stats_out_;  // pinned: the summed stats, read after the step
};

}  // namespace dsx::engine
