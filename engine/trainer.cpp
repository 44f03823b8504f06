// One rank's training loop (see trainer.h).
#include "engine/trainer.h"

#include <chrono>

#include "dsx/error.h"
#include "engine/training_setup.h"
#include "trace/trace.h"

namespace dsx::engine {
namespace {

std::unique_ptr<zero::ZeroEngine> make_zero(const config::EngineConfig& config, models::Model& model,
                                            comm::Communicator& comm, const float* initial, size_t memory_limit,
                                            device::Device* device, std::vector<std::string>& notes) {
  zero::ZeroOptions options = zero_options_from(config, notes);
  if (std::string note = precision_note(config, model.on_device()); !note.empty()) notes.push_back(note);
  options.memory_limit = memory_limit;
  if (!device) {
    // ZeRO on the host: a CPU model's activations share its memory; a GPU model's do not.
    options.model_activation_bytes = model.on_device() ? 0 : model.activation_bytes();
    options.frozen_param_bytes = model.on_device() ? 0 : model.frozen_bytes();
    return std::make_unique<zero::ZeroEngine>(zero_params_of(model), model.num_layers(), initial, options, comm);
  }
  // ZeRO on the model's device: its working copy and gradients in the model's dtype (beside an
  // fp32 master for a 16-bit model), and the model's activations in the same memory.
  options.model_dtype = model.param_dtype();
  options.model_activation_bytes = model.activation_bytes();
  options.frozen_param_bytes = model.frozen_bytes();  // LoRA's base, in the same memory
  return std::make_unique<zero::ZeroEngine>(zero_params_of(model), model.num_layers(), initial, options, comm,
                                            *device);
}

}  // namespace

Trainer::Trainer(const config::EngineConfig& config, models::Model& model, comm::Communicator& comm, const float* initial,
                 size_t memory_limit, device::Device* device)
    : config_(config), model_(model), comm_(comm),
      zero_(make_zero(config, model, comm, initial, memory_limit, device, notes_)),
      access_(*zero_), schedule_(lr_schedule_from(config)) {
  if (model.on_device() && !device) {
    bridge_ = make_device_bridge(model, access_, access_);
    notes_.push_back("GPU model: ZeRO's master weights, gradients and optimizer state stay in host memory "
                     "(ZeRO-Offload); " + std::to_string(bridge_->device_bytes() / 1000000) +
                     " MB of parameter and gradient copies on the GPU");
  }
  // ZeRO on a GPU, computing there: the loss stays on the device (the model says whether it can).
  if (device && !device->host_accessible() && model.keep_loss_on_device(true)) {
    model.keep_loss_on_device(false);  // kept during train_batch only: evaluation reads it on the host
    loss_on_device_ = true;
    device_stats_ = zero::Buffer<float>(*device, device->compute_stream(), stats_ledger_,
                                        zero::MemoryKind::Buffers, 2);
    stats_in_ = device::OwnedMemory(*device, device::OwnedMemory::Kind::Pinned, sizeof(float));
    stats_out_ = device::OwnedMemory(*device, device::OwnedMemory::Kind::Pinned, 2 * sizeof(float));
  }
  if (config.dp_world_size != comm.size()) {
    throw Error(ErrorKind::Config, "the config was resolved for " + std::to_string(config.dp_world_size) +
                                       " data-parallel ranks but the job has " + std::to_string(comm.size()));
  }
}

models::ParamAccess& Trainer::params() {
  if (bridge_) return *bridge_;
  return access_;
}

void Trainer::params_changed() {
  if (bridge_) bridge_->params_changed();
}

zero::StepHyper Trainer::next_hyper() const {
  zero::StepHyper hyper;
  hyper.lr = config_.optimizer.params.lr;
  if (schedule_) {
    ScheduleValue v = schedule_->at(schedule_iteration_);
    hyper.lr = v.lr;
    hyper.beta1 = v.beta1;
    hyper.beta2 = v.beta2;
  }
  return hyper;
}

std::vector<double> Trainer::momentum() const {
  const zero::OptimizerSpec& spec = zero_->optimizer().spec();
  const zero::StepHyper hyper = next_hyper();
  // From the config (doubles, as the user wrote them), not the kernels' floats.
  const std::vector<double>& written = config_.optimizer.params.betas;
  auto betas = [&](double b1, double b2) {
    if (written.size() == 2) b1 = written[0], b2 = written[1];
    return std::vector<double>{hyper.beta1.value_or(b1), hyper.beta2.value_or(b2)};
  };
  switch (spec.type) {
    case zero::OptimizerType::Adam: return betas(spec.adam.beta1, spec.adam.beta2);
    case zero::OptimizerType::Lamb: return betas(spec.lamb.beta1, spec.lamb.beta2);
    case zero::OptimizerType::Lion: return betas(spec.lion.beta1, spec.lion.beta2);
    case zero::OptimizerType::Sgd: return {spec.sgd.momentum};
    case zero::OptimizerType::Adagrad: return {};
  }
  return {};
}

void Trainer::restore_counters(int64_t global_steps, int64_t skipped_steps, int64_t micro_steps,
                               int64_t schedule_iteration) {
  global_steps_ = global_steps;
  skipped_steps_ = skipped_steps;
  micro_steps_ = micro_steps;
  schedule_iteration_ = schedule_iteration;
}

void Trainer::add_device_loss(int j, int gas) {
  device::Device& device = zero_->device();
  device.sum_blocks(kernels::DType::F32, model_.device_loss(), 1, 0, 1.0f / static_cast<float>(gas),
                    kernels::DType::F32, device_stats_.data(), 1, j > 0, device.compute_stream());
}

void Trainer::enqueue_step_stats(int64_t tokens) {
  device::Device& device = zero_->device();
  device::Stream& compute = device.compute_stream();
  // The last step's copy of stats_in_ ran before that step's wait: the host may write it now.
  stats_in_.as<float>()[0] = static_cast<float>(tokens);
  device.copy(device_stats_.data() + 1, stats_in_.get(), sizeof(float), compute);
  zero_->sum_on_device(device_stats_.data(), 2);
  device.copy(stats_out_.get(), device_stats_.data(), 2 * sizeof(float), compute);
}

// Called after the optimizer step, whose wait brought the device's stats to the host.
std::array<float, 2> Trainer::step_stats(double loss_sum, int64_t tokens) {
  if (loss_on_device_) return {stats_out_.as<float>()[0], stats_out_.as<float>()[1]};
  const int gas = static_cast<int>(config_.gradient_accumulation_steps);
  std::array<float, 2> stats{static_cast<float>(loss_sum / gas), static_cast<float>(tokens)};
  trace::Scope wait("loss allreduce", "wait");
  comm_.allreduce(stats.data(), 2, kernels::DType::F32, kernels::ReduceOp::Sum)->wait();
  return stats;
}

TrainStep Trainer::train_batch(models::DataLoader& loader) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  trace::Scope step_span(trace::kStepName, static_cast<int>(global_steps_ + 1), trace::kStepCategory);
  const int gas = static_cast<int>(config_.gradient_accumulation_steps);
  TrainStep out;
  double loss_sum = 0;
  int64_t tokens = 0;
  const float grad_scale = static_cast<float>(zero_->loss_scale() / gas);
  struct KeepLoss {  // the loss on the device for these micro-steps only
    models::Model& model;
    bool on;
    ~KeepLoss() {
      if (on) model.keep_loss_on_device(false);
    }
  } keep{model_, loss_on_device_ && model_.keep_loss_on_device(true)};
  for (int j = 0; j < gas; ++j) {
    {
      trace::Scope data("data", "phase");
      loader.next(batch_);
    }
    if (bridge_) bridge_->begin_micro_step();
    models::ParamAccess& access = params();
    models::GradSink& sink = bridge_ ? static_cast<models::GradSink&>(*bridge_) : access_;
    MicroStepResult r = train_micro_step(model_, *zero_, access, sink, batch_.inputs.data(), batch_.targets.data(),
                                         batch_.B, batch_.T, j == gas - 1, grad_scale);
    if (loss_on_device_) {
      add_device_loss(j, gas);
    } else {
      loss_sum += r.loss;
    }
    tokens += static_cast<int64_t>(batch_.B) * batch_.T;
    out.forward_seconds += r.forward_seconds;
    out.backward_seconds += r.backward_seconds;
    ++micro_steps_;
  }
  if (loss_on_device_) enqueue_step_stats(tokens);
  const zero::StepHyper hyper = next_hyper();
  const auto step_start = Clock::now();
  {
    trace::Scope optimizer("optimizer step", "phase");
    out.zero = zero_->step(hyper);
  }
  if (out.zero.applied) params_changed();
  out.step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  if (out.zero.applied) {
    ++schedule_iteration_;
  } else {
    ++skipped_steps_;
  }
  ++global_steps_;
  // The loss every rank reports: the mean over micro-batches and ranks.
  const std::array<float, 2> stats = step_stats(loss_sum, tokens);
  out.loss = stats[0] / comm_.size();
  out.tokens = static_cast<int64_t>(stats[1]);
  out.samples = config_.train_batch_size;
  out.lr = hyper.lr;
  out.global_step = global_steps_;
  out.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace dsx::engine
