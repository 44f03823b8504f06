// ZeRO stages 0-3 (see zero_engine.h).
#include "zero/zero_engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "comm/host_device.h"
#include "device/stream_span.h"
#include "dsx/error.h"
#include "kernels/clip_math.h"
#include "kernels/mixed_precision.h"
#include "trace/trace.h"

namespace dsx::zero {
namespace {

std::vector<ParamInfo> infos_of(const std::vector<ModelParam>& params) {
  std::vector<ParamInfo> infos;
  infos.reserve(params.size());
  for (const ModelParam& p : params) infos.push_back(p.info);
  return infos;
}

}  // namespace

ZeroEngine::ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
                       const ZeroOptions& options, comm::Communicator& comm)
    : ZeroEngine(params, num_layers, initial, options, comm, comm::make_host_device(), nullptr) {}

ZeroEngine::ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
                       const ZeroOptions& options, comm::Communicator& comm, device::Device& device)
    : ZeroEngine(params, num_layers, initial, options, comm, nullptr, &device) {}

ZeroEngine::ZeroEngine(const std::vector<ModelParam>& params, int num_layers, const float* initial,
                       const ZeroOptions& options, comm::Communicator& comm,
                       std::unique_ptr<device::Device> owned, device::Device* device)
    : owned_device_(std::move(owned)),
      device_(device ? *device : *owned_device_),
      comm_stream_(device_.create_stream("zero.comm")),
      params_(params),
      options_(options),
      comm_(comm),
      ctx_{device_, device_.compute_stream(), *comm_stream_, comm, ledger_, options_},
      layout_(infos_of(params), num_layers),
      scaler_(options.loss_scaler) {
  partitioning_ = make_partitioning(options.stage, layout_, comm.size());  // refuses a bad stage
  ledger_.set_limit(options.memory_limit);
  if (options.model_activation_bytes)
    ledger_.add(MemoryKind::Activations, options.model_activation_bytes);
  if (options.frozen_param_bytes) ledger_.add(MemoryKind::Params, options.frozen_param_bytes);
  const int world = comm.size();
  if (partitioning_->flat() && world > 1 &&
      options.allgather_bucket_size < 2 * static_cast<int64_t>(world)) {
    // Shards of fewer than 2 elements per rank would take millions of allgathers per step.
    throw Error(ErrorKind::Config,
                "zero_optimization.allgather_bucket_size is " +
                    std::to_string(options.allgather_bucket_size) +
                    " elements; the parameter allgather of " + std::to_string(world) +
                    " ranks needs at least " + std::to_string(2 * world) +
                    " (2 per rank). Raise it (DeepSpeed's default is " +
                    std::to_string(config::ZeroPartitioning{}.allgather_bucket_size) + ").");
  }
  device::Stream& compute = ctx_.compute;
  params_store_ = make_param_store(layout_, *partitioning_, ctx_);
  // The initial values this rank stores, from the model's layout: the working copy in the model's
  // dtype (rounded here, on the host) and, for a 16-bit model, the fp32 master partition.
  const kernels::DType dtype = options.model_dtype;
  std::vector<std::vector<uint8_t>> rounded;  // host sources of the copies, alive until they ran
  for (const Run& run : partitioning_->storage_runs(comm.rank())) {
    const float* from =
        initial + params_[layout_.index_at(run.position)].model_offset + run.param_offset;
    const void* src = from;
    if (dtype != kernels::DType::F32) {
      rounded.emplace_back(model_bytes(run.count));
      kernels::cast(kernels::DType::F32, from, dtype, rounded.back().data(), run.count);
      src = rounded.back().data();
    }
    params_store_->store(run.offset, src, run.count);
  }
  grads_ = make_grad_store(options.stage, layout_, *partitioning_, ctx_);
  reducer_ = std::make_unique<GradReducer>(grads_->mode(), layout_, *partitioning_, ctx_,
                                           grads_->reduced_into(),
                                           [this](int layer) { grads_->packed(layer); });
  make_optimizer();
  init_master(initial);
  scalar_ = Buffer<double>(device_, compute, scratch_ledger_, MemoryKind::Buffers, 1);
  global_sum_sq_ = Buffer<float>(device_, compute, scratch_ledger_, MemoryKind::Buffers, 1);
  grad_factor_ = Buffer<float>(device_, compute, scratch_ledger_, MemoryKind::Buffers, 1);
  layer_params_.assign(static_cast<size_t>(num_layers), nullptr);
  // `initial` is the caller's: the copies must have read it before the constructor returns.
  compute.synchronize(options_.comm_timeout);
  // Stage 3 gathers the shards written above on the communication stream.
  params_store_->written();
}

void ZeroEngine::make_optimizer() {
  // The master goes to the optimizer's swap files where the store keeps none (stage 3).
  std::optional<OptimizerSwapOptions> nvme = options_.optimizer_nvme;
  if (nvme) nvme->swap_master = params_store_->master_swapped();
  optimizer_ = std::make_unique<PartitionOptimizer>(
      options_.optimizer, master_numel(), partitioning_->segments(comm_.rank()),
      layout_.num_params(), ledger_, device_, ctx_.compute, nvme, comm_.rank());
  if (params_store_->master_swapped()) {
    optimizer_->on_group_stepped([this](size_t begin, size_t count, const float* master) {
      params_store_->master_stepped(begin, count, master);
    });
  }
}

// The fp32 master partition from the model's initial values: into the store's buffer, or, when
// it lives in the optimizer's swap files, through a host copy (padding zero).
void ZeroEngine::init_master(const float* initial) {
  if (!params_store_->separate_master()) return;
  float* master = params_store_->master();
  std::vector<float> host(master ? 0 : master_numel(), 0.0f);
  for (const Run& run : partitioning_->partition_runs(comm_.rank())) {
    const float* from =
        initial + params_[layout_.index_at(run.position)].model_offset + run.param_offset;
    if (master)
      device_.copy(master + run.offset, from, run.count * sizeof(float), ctx_.compute);
    else
      std::memcpy(host.data() + run.offset, from, run.count * sizeof(float));
  }
  if (!master) optimizer_->copy_master_in(host.data());
}

ZeroEngine::~ZeroEngine() {
  // Both streams waited for, each even when the other failed (host_sync() stops at the first
  // failure): the buffers freed after this, on either stream, must be ordered after the work
  // both queued, or the model's last reads race the frees.
  for (device::Stream* stream : {comm_stream_.get(), &ctx_.compute}) {
    try {
      stream->synchronize(options_.comm_timeout);
    } catch (...) {
      // a failed stream was reported where it failed; the buffers go either way
    }
  }
}

void ZeroEngine::touch(const void* data, size_t bytes, device::Access access, const char* what) {
  const std::array<device::Touch, 1> t{device::Touch{data, bytes, access}};
  device_.declare(ctx_.compute, t, what);
}

void ZeroEngine::host_sync() {
  comm_stream_->synchronize(options_.comm_timeout);
  ctx_.compute.synchronize(options_.comm_timeout);
}

std::vector<std::string> ZeroEngine::optimizer_state_names() {
  return optimizer_->state_names();
}

ZeroEngine::PartitionState ZeroEngine::save_partition() {
  const size_t n = master_numel();
  PartitionState out;
  out.master.resize(n);
  if (params_store_->master_swapped())
    optimizer_->copy_master_out(out.master.data());
  else
    device_.copy(out.master.data(), params_store_->master(), n * sizeof(float), ctx_.compute);
  const std::vector<std::string> names = optimizer_->state_names();
  for (size_t i = 0; i < names.size(); ++i) {
    out.optimizer.emplace_back(names[i], std::vector<float>(n));
    optimizer_->copy_state_out(i, out.optimizer.back().second.data());
  }
  host_sync();  // the copies, and the step and reductions before them, have run
  return out;
}

size_t ZeroEngine::master_numel() const { return partitioning_->partition_numel(); }

// ---- the model's side ----

void ZeroEngine::acquire(int layer) {
  const auto* full = static_cast<const uint8_t*>(params_store_->acquire(layer));
  layer_params_[static_cast<size_t>(layer)] = full;
  touch(full, model_bytes(layout_.layer_numel(layer)), device::Access::Read,
        "the model's read of a layer's parameters");
}

void ZeroEngine::prefetch(int layer) { params_store_->prefetch(layer); }

const void* ZeroEngine::param(size_t index) {
  const int layer = params_[index].info.layer;
  const uint8_t* full = layer_params_[static_cast<size_t>(layer)];
  if (!full) {
    throw Error(ErrorKind::Internal, "parameter " + std::to_string(index) + " of layer " +
                                         std::to_string(layer) + " read before acquire()");
  }
  return full + model_bytes(layout_.flat_offset(index) - layout_.layer_range(layer).begin);
}

void ZeroEngine::release(int layer) {
  layer_params_[static_cast<size_t>(layer)] = nullptr;
  params_store_->release(layer, backward_);
}

void* ZeroEngine::grad(size_t index) {
  return grads_->grad(params_[index].info.layer, layout_.flat_offset(index));
}

void ZeroEngine::grad_ready(int layer) {
  void* g = grads_->layer_grads(layer);
  touch(g, model_bytes(layout_.layer_numel(layer)), device::Access::Write,
        "the model's write of a layer's gradients");
  if (grads_->reduces(boundary_)) reducer_->add(layer, g);
}

// ---- the engine's side ----

void ZeroEngine::begin_micro_step(bool boundary) {
  boundary_ = boundary;
  backward_ = false;
}

void ZeroEngine::end_micro_step() {
  if (grads_->reduces(boundary_)) reducer_->flush_and_order();
}

// The step's one host synchronisation: `bytes` of device values copied into pinned host memory
// and waited for together. The reductions before them are done then too (settle).
const void* ZeroEngine::read_step_values(const void* values, size_t bytes) {
  if (step_values_.bytes() < bytes)
    step_values_ = device::OwnedMemory(device_, device::OwnedMemory::Kind::Pinned, bytes);
  device_.copy(step_values_.get(), values, bytes, ctx_.compute);
  ctx_.compute.synchronize(options_.comm_timeout);
  reducer_->settle();
  return step_values_.get();
}

// The gradients' sum of squares, as the step needs it: stage 0 holds them all (a double); a
// partitioned rank's sum is added to the others' in fp32, as DeepSpeed's norm allreduce adds
// them, by a device allreduce before the one read, so the ranks cost no second host wait. The
// optimizer's unscale and clip factor is computed from it on the device too (grad_factor_), so
// the kernels read it there; the host's read serves the overflow skip and the logs.
double ZeroEngine::read_sum_of_squares(kernels::DType dtype, const void* data, size_t count,
                                       double loss_scale) {
  trace::Scope span("overflow check and gradient norm", "zero");
  device_.sum_of_squares(dtype, data, count, scalar_.data(), ctx_.compute);
  const bool partitioned = partitioning_->partitioned();
  if (partitioned) {
    device_.narrow_to_float(scalar_.data(), global_sum_sq_.data(), 1, ctx_.compute);
    sum_on_device(global_sum_sq_.data(), 1);
  }
  const kernels::DeviceSumOfSquares sum{
      partitioned ? static_cast<const void*>(global_sum_sq_.data()) : scalar_.data(), partitioned};
  device_.zero_grad_factor(sum, loss_scale, options_.gradient_clipping, grad_factor_.data(),
                           ctx_.compute);
  if (!partitioned)
    return *static_cast<const double*>(read_step_values(scalar_.data(), sizeof(double)));
  return *static_cast<const float*>(read_step_values(global_sum_sq_.data(), sizeof(float)));
}

// Host values summed over the ranks, in fp32 as DeepSpeed's norm allreduce is, through device
// memory (nccl reads only that) on the communication stream. One rank's sum is its own fp32
// value, with no device work and no wait.
void ZeroEngine::sum_across_ranks(double* values, size_t n) {
  if (!partitioning_->partitioned()) return;
  if (comm_.size() == 1) {
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(values[i]);
    return;
  }
  trace::Scope span("sum across ranks", "wait");
  if (rank_sums_.size() < n) {
    rank_sums_ = Buffer<float>(device_, *comm_stream_, scratch_ledger_, MemoryKind::Buffers, n);
    rank_sums_host_ =
        device::OwnedMemory(device_, device::OwnedMemory::Kind::Pinned, n * sizeof(float));
  }
  float* f = rank_sums_host_.as<float>();
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>(values[i]);
  device_.copy(rank_sums_.data(), f, n * sizeof(float), *comm_stream_);
  comm_.allreduce_on(device_, *comm_stream_, rank_sums_.data(), n, kernels::DType::F32,
                     kernels::ReduceOp::Sum);
  device_.copy(f, rank_sums_.data(), n * sizeof(float), *comm_stream_);
  comm_stream_->synchronize(options_.comm_timeout);
  for (size_t i = 0; i < n; ++i) values[i] = f[i];
}

std::vector<double> ZeroEngine::tensor_sums_of_squares(const void* grads) {
  const size_t n = params_.size();
  if (tensor_sums_.size() < n) {
    tensor_sums_ = Buffer<double>(device_, ctx_.compute, scratch_ledger_, MemoryKind::Buffers, n);
  }
  for (size_t i = 0; i < n; ++i) {
    const float* tensor = static_cast<const float*>(grads) + layout_.flat_offset(i);
    device_.sum_of_squares(kernels::DType::F32, tensor, params_[i].info.numel, tensor_sums_.data() + i,
                           ctx_.compute);
  }
  const auto* sums =
      static_cast<const double*>(read_step_values(tensor_sums_.data(), n * sizeof(double)));
  return std::vector<double>(sums, sums + n);
}

void ZeroEngine::sum_on_device(float* values, size_t n) {
  if (comm_.size() == 1) return;
  if (!summed_) summed_ = device_.create_event();
  ctx_.order(ctx_.compute, *comm_stream_, *summed_);
  comm_.allreduce_on(device_, *comm_stream_, values, n, kernels::DType::F32, kernels::ReduceOp::Sum);
  ctx_.order(*comm_stream_, ctx_.compute, *summed_);
}

// DeepSpeed's stage-0 engine clips through its clip_grad_norm_, not ZeRO's formula, and
// DeepSpeed 0.19.8 runs it in fp32 tensors throughout: each tensor's norm, their squares summed in
// fp32, the square root, norm / world averaged over the ranks by an fp32 allreduce. Double sums
// here (older DeepSpeed's arithmetic) moved the clip coefficient's last bit in about a quarter of
// cases. Not copied, each within an ulp: torch's pow(0.5) (Sleef's powf, not sqrtf) and its
// summation order (SIMD lanes over the module's parameter order; here dsx's order, one by one).
// The allreduce adds equal values: at stage 0 every rank holds the same reduced gradients (the
// collectives hand every rank the same bits). So the host adds them, one by one as a ring does,
// and the step keeps its one host wait; exact for 1 and 2 ranks, within an ulp of a tree's order
// beyond.
float ZeroEngine::stage0_clip_norm(const std::vector<double>& tensor_sums) {
  trace::Scope span("clip norm (stage 0)", "zero");
  float total = 0;
  for (double s : tensor_sums) {
    const float tensor_norm = static_cast<float>(std::sqrt(s));
    const float square = tensor_norm * tensor_norm;  // rounded before the sum, as torch's pow(2)
    total += square;
  }
  const float averaged = std::sqrt(total) / static_cast<float>(comm_.size());
  float summed = 0;
  for (int r = 0; r < comm_.size(); ++r) summed += averaged;
  return summed;
}

// Unscale and clip in one factor, with the scale backward used, and the step's clip coefficient
// for the logs. DeepSpeed's ZeRO formula (kernels/clip_math.h): the device value that
// read_sum_of_squares enqueued, the host working out the same bits for the result only. At stage
// 0 (fp32, no loss scale) the coefficient of its stage-0 engine, from the per-tensor sums the
// host read: a host scalar.
kernels::GradFactor ZeroEngine::step_grad_factor(bool stage0_clipping,
                                                 const std::vector<double>& tensor_sums,
                                                 double sum_sq, StepResult& result) {
  if (stage0_clipping) {
    if (!std::isfinite(sum_sq)) return 1.0f;
    // fp32 tensors: max_norm / (norm + 1e-6), then grad.mul_(min(1, coefficient)).
    const float coefficient =
        static_cast<float>(options_.gradient_clipping) / (stage0_clip_norm(tensor_sums) + 1e-6f);
    if (coefficient >= 1.0f) return 1.0f;
    result.clip_coefficient = coefficient;
    return coefficient;
  }
  const double c =
      kernels::zero_clip_divisor(sum_sq, result.loss_scale, options_.gradient_clipping);
  if (c > 1.0) result.clip_coefficient = 1.0 / c;
  return kernels::GradFactor(1.0f, grad_factor_.data());
}

StepResult ZeroEngine::step(const StepHyper& hyper) {
  StepResult result;
  result.loss_scale = scaler_.scale();
  const kernels::DType dtype = options_.model_dtype;
  void* grads = grads_->partition();
  const size_t count = master_numel();

  // Stage 0 in fp32 without a loss scale clips as DeepSpeed's stage-0 engine, from per-tensor
  // sums of squares; the same pass then gives the global norm.
  const bool stage0_engine =
      options_.stage == 0 && dtype == kernels::DType::F32 && result.loss_scale == 1.0;
  const bool stage0_clipping = stage0_engine && options_.gradient_clipping > 0.0;
  std::vector<double> tensor_sums;
  double sum_sq = 0;
  if (stage0_clipping) {
    tensor_sums = tensor_sums_of_squares(grads);
    for (double t : tensor_sums) sum_sq += t;  // stage 0: every rank holds the whole sum
  } else {
    // Sum of squares of this rank's partition, summed over ranks (stage 0: every rank holds all).
    sum_sq = read_sum_of_squares(dtype, grads, count, result.loss_scale);
  }
  const bool finite = std::isfinite(sum_sq);
  if (!finite && options_.check_overflow) {
    scaler_.update(true);  // may throw at the minimum scale (ZeRO)
    grads_->zero();
    result.applied = false;
    result.grad_norm = -1.0;
    return result;
  }
  result.grad_norm = finite ? std::sqrt(sum_sq) / result.loss_scale : -1.0;
  const kernels::GradFactor grad_factor =
      step_grad_factor(stage0_clipping, tensor_sums, sum_sq, result);
  // The optimizer reads fp32 gradients: a 16-bit model's are widened for the step only. It writes
  // the fp32 master and, for a 16-bit model, the working copy of the partition.
  const float* grads32 = static_cast<const float*>(grads);
  Buffer<float> widened;
  kernels::ParamCopy copy;
  if (dtype != kernels::DType::F32) {
    widened = ctx_.buffer<float>(MemoryKind::Buffers, count, ctx_.compute);
    device_.cast(dtype, grads, kernels::DType::F32, widened.data(), count, ctx_.compute);
    grads32 = widened.data();
  }
  if (params_store_->separate_master()) copy = params_store_->working_copy();
  {
    trace::Scope span("optimizer", "zero");
    device::StreamSpan on_stream(device_, ctx_.compute, "optimizer kernel", "zero",
                                 {{"elements", static_cast<double>(count)}});
    optimizer_->step(
        params_store_->master(), grads32, grad_factor, hyper,
        [this](double* values, size_t n) { sum_across_ranks(values, n); }, copy);
  }
  widened.reset(ctx_.compute);
  scaler_.update(false);
  trace::Scope span("parameters after step", "zero");  // stages 1/2: the allgather of the partitions
  device::StreamSpan on_stream(device_, ctx_.compute, "parameters after step", "zero");
  params_store_->after_step();
  grads_->zero();
  result.applied = true;
  return result;
}

void ZeroEngine::load_partition(const PartitionState& state) {
  const size_t n = master_numel();
  auto check = [&](const std::vector<float>& values, const std::string& what) {
    if (values.size() != n) {
      throw Error(ErrorKind::Internal, "load_partition: " + what + " has " + std::to_string(values.size()) +
                                           " elements, this rank's partition " + std::to_string(n));
    }
  };
  check(state.master, "the master partition");
  host_sync();  // the last step has finished with the buffers overwritten here
  std::vector<uint8_t> working;  // a swapped master's working copy, alive until host_sync()
  if (params_store_->master_swapped()) {
    optimizer_->copy_master_in(state.master.data());
    working.resize(model_bytes(n));
    kernels::cast(kernels::DType::F32, state.master.data(), options_.model_dtype, working.data(), n);
    params_store_->store(0, working.data(), n);  // stage 3: the storage is the partition
  } else {
    device_.copy(params_store_->master(), state.master.data(), n * sizeof(float), ctx_.compute);
  }
  const std::vector<std::string> names = optimizer_->state_names();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    auto it = std::find_if(state.optimizer.begin(), state.optimizer.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (it == state.optimizer.end()) {
      throw Error(ErrorKind::Internal, "load_partition: no values for the optimizer state '" + name + "'");
    }
    check(it->second, "optimizer state '" + name + "'");
    optimizer_->copy_state_in(i, it->second.data());
  }
  if (params_store_->separate_master() && !params_store_->master_swapped())
    params_store_->refresh_working();
  params_store_->after_step();  // stages 1/2: an allgather, so every rank is here
  host_sync();                  // `state` is the caller's
}

void ZeroEngine::gather_params(float* model_flat) {
  // The parameters as the model sees them, widened to fp32 for a 16-bit model.
  std::vector<float> full(layout_.numel());
  if (options_.model_dtype == kernels::DType::F32) {
    params_store_->gather_all(full.data());
  } else {
    std::vector<uint8_t> working(model_bytes(layout_.numel()));
    params_store_->gather_all(working.data());
    kernels::cast(options_.model_dtype, working.data(), kernels::DType::F32, full.data(),
                  full.size());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    std::memcpy(model_flat + params_[i].model_offset, full.data() + layout_.flat_offset(i),
                params_[i].info.numel * sizeof(float));
  }
}

// ---- re-cutting partitions ----

size_t ZeroEngine::partition_numel_of(const ZeroLayout& layout, int stage, int world, int rank) {
  (void)rank;
  return make_partitioning(stage, layout, world)->partition_numel();
}

void ZeroEngine::scatter_partition(const ZeroLayout& layout, int stage, int world, int rank,
                                   const float* partition, float* full) {
  make_partitioning(stage, layout, world)->scatter(partition, full, rank);
}

void ZeroEngine::take_partition(const float* full, float* partition) const {
  partitioning_->take(full, partition, comm_.rank());
}

}  // namespace dsx::zero
