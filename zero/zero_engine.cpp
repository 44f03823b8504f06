// ZeRO stages 0-3 (see zero_engine.h).
#include "zero/zero_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "dsx/error.h"
#include "kernels/mixed_precision.h"
#include "zero/partition_allgather.h"

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
    : params_(params), options_(options), comm_(comm), layout_(infos_of(params), num_layers),
      scaler_(options.loss_scaler) {
  if (options.stage < 0 || options.stage > 3) {
    throw Error(ErrorKind::Config, "zero_optimization.stage must be 0, 1, 2 or 3, not " +
                                       std::to_string(options.stage));
  }
  ledger_.set_limit(options.memory_limit);
  if (options.model_activation_bytes) ledger_.add(MemoryKind::Activations, options.model_activation_bytes);
  const std::vector<size_t> numels = layout_.numels_in_order();
  const int world = comm.size();
  const int stage = options.stage;
  if (stage == 1 || stage == 2) flat_ = std::make_unique<FlatPartition>(numels, world);
  if (flat_ && world > 1 && options.allgather_bucket_size < 2 * static_cast<size_t>(world)) {
    // Shards of fewer than 2 elements per rank would take millions of allgathers per step.
    throw Error(ErrorKind::Config, "zero_optimization.allgather_bucket_size is " +
                                       std::to_string(options.allgather_bucket_size) +
                                       " elements; the parameter allgather of " + std::to_string(world) +
                                       " ranks needs at least " + std::to_string(2 * world) +
                                       " (2 per rank). Raise it (DeepSpeed's default is 500000000).");
  }
  if (stage == 3) shards_ = std::make_unique<ShardedParams>(numels, world);

  // Parameters: the full copy (stages 0-2) or this rank's shards (stage 3).
  if (stage <= 2) {
    params_full_ = Buffer<float>(ledger_, MemoryKind::Params, flat_ ? flat_->padded_numel() : layout_.numel());
    for (size_t i = 0; i < params_.size(); ++i) {
      std::memcpy(params_full_.data() + layout_.flat_offset(i), initial + params_[i].model_offset,
                  params_[i].info.numel * sizeof(float));
    }
  } else {
    params_partition_ = Buffer<float>(ledger_, MemoryKind::Params, shards_->partition_numel());
    const int rank = comm.rank();
    for (size_t pos = 0; pos < layout_.num_params(); ++pos) {
      const size_t real = shards_->real_in_shard(pos, rank);
      if (real == 0) continue;
      const ModelParam& p = params_[layout_.index_at(pos)];
      std::memcpy(params_partition_.data() + shards_->shard_offset(pos),
                  initial + p.model_offset + shards_->shard_numel(pos) * static_cast<size_t>(rank),
                  real * sizeof(float));
    }
    layer_params_.assign(static_cast<size_t>(num_layers), nullptr);
  }

  // Gradients: full (stages 0-1, accumulated across micro-steps) or partition (stages 2-3).
  GradReducer::Mode mode = GradReducer::Mode::InPlace;
  if (stage <= 1) {
    grads_full_ = Buffer<float>(ledger_, MemoryKind::Grads, params_full_.size());
  } else {
    grads_partition_ = Buffer<float>(ledger_, MemoryKind::Grads,
                                     stage == 2 ? flat_->partition_numel() : shards_->partition_numel());
    grad_slots_.resize(static_cast<size_t>(num_layers));
    mode = stage == 2 ? GradReducer::Mode::ToPartition : GradReducer::Mode::ToShards;
  }
  // Stages 2/3 hold a layer's gradients only until its bucket has been copied for reduction.
  auto copied = [this](int layer) {
    if (!grad_slots_.empty()) grad_slots_[static_cast<size_t>(layer)].reset();
  };
  reducer_ = std::make_unique<GradReducer>(mode, layout_, flat_.get(), shards_.get(), options_, comm_, ledger_,
                                           grads_partition_.data(), copied);
  if (stage == 3) {
    gatherer_ = std::make_unique<ParamGatherer>(layout_, *shards_, options_, comm_, ledger_,
                                                params_partition_.data());
  }
  optimizer_ = std::make_unique<PartitionOptimizer>(options_.optimizer, master_numel(), optimizer_segments(),
                                                    layout_.num_params(), ledger_);
}

ZeroEngine::~ZeroEngine() = default;

std::vector<Segment> ZeroEngine::optimizer_segments() const {
  std::vector<Segment> segments;
  const int rank = comm_.rank();
  if (options_.stage == 0) {
    for (size_t pos = 0; pos < layout_.num_params(); ++pos) {
      segments.push_back({layout_.offset_at(pos), layout_.info_at(pos).numel, layout_.info_at(pos).decay, pos});
    }
  } else if (flat_) {
    const size_t begin = flat_->partition_begin(rank);
    for (const Piece& piece : flat_->pieces_of_rank(rank)) {
      segments.push_back({piece.flat_offset - begin, piece.count, layout_.info_at(piece.param).decay, piece.param});
    }
  } else {
    for (size_t pos = 0; pos < layout_.num_params(); ++pos) {
      const size_t real = shards_->real_in_shard(pos, rank);
      if (real > 0) segments.push_back({shards_->shard_offset(pos), real, layout_.info_at(pos).decay, pos});
    }
  }
  return segments;
}

float* ZeroEngine::master_partition() {
  if (options_.stage == 0) return params_full_.data();
  if (flat_) return params_full_.data() + flat_->partition_begin(comm_.rank());
  return params_partition_.data();
}

size_t ZeroEngine::master_numel() const {
  if (options_.stage == 0) return layout_.numel();
  if (flat_) return flat_->partition_numel();
  return shards_->partition_numel();
}

float* ZeroEngine::grad_partition() {
  if (options_.stage == 0) return grads_full_.data();
  if (options_.stage == 1) return grads_full_.data() + flat_->partition_begin(comm_.rank());
  return grads_partition_.data();
}

size_t ZeroEngine::grad_partition_numel() const { return master_numel(); }

// ---- the model's side ----

void ZeroEngine::acquire(int layer) {
  if (gatherer_) layer_params_[static_cast<size_t>(layer)] = gatherer_->acquire(layer);
}

void ZeroEngine::prefetch(int layer) {
  if (gatherer_) gatherer_->prefetch(layer);
}

const float* ZeroEngine::param(size_t index) {
  if (!gatherer_) return params_full_.data() + layout_.flat_offset(index);
  const int layer = params_[index].info.layer;
  const float* full = layer_params_[static_cast<size_t>(layer)];
  if (!full) {
    throw Error(ErrorKind::Internal, "parameter " + std::to_string(index) + " of layer " + std::to_string(layer) +
                                         " read before acquire()");
  }
  return full + (layout_.flat_offset(index) - layout_.layer_range(layer).begin);
}

void ZeroEngine::release(int layer) {
  if (!gatherer_) return;
  layer_params_[static_cast<size_t>(layer)] = nullptr;
  gatherer_->release(layer, backward_);
}

float* ZeroEngine::grad(size_t index) {
  if (!grads_full_.empty()) return grads_full_.data() + layout_.flat_offset(index);
  const int layer = params_[index].info.layer;
  Buffer<float>& slot = grad_slots_[static_cast<size_t>(layer)];
  if (slot.empty()) slot = Buffer<float>(ledger_, MemoryKind::Buffers, layout_.layer_numel(layer));
  return slot.data() + (layout_.flat_offset(index) - layout_.layer_range(layer).begin);
}

void ZeroEngine::grad_ready(int layer) {
  if (!grads_full_.empty()) {
    // Stages 0/1 accumulate locally and reduce once, in the boundary micro-step.
    if (boundary_) reducer_->add(layer, grads_full_.data() + layout_.layer_range(layer).begin);
    return;
  }
  Buffer<float>& slot = grad_slots_[static_cast<size_t>(layer)];
  if (slot.empty()) slot = Buffer<float>(ledger_, MemoryKind::Buffers, layout_.layer_numel(layer));
  reducer_->add(layer, slot.data());
}

// ---- the engine's side ----

void ZeroEngine::begin_micro_step(bool boundary) {
  boundary_ = boundary;
  backward_ = false;
}

void ZeroEngine::end_micro_step() {
  if (options_.stage >= 2 || boundary_) reducer_->flush_and_wait();
}

void ZeroEngine::zero_grads() {
  if (!grads_full_.empty()) std::memset(grads_full_.data(), 0, grads_full_.size() * sizeof(float));
  if (!grads_partition_.empty()) std::memset(grads_partition_.data(), 0, grads_partition_.size() * sizeof(float));
}

StepResult ZeroEngine::step(const StepHyper& hyper) {
  StepResult result;
  result.loss_scale = scaler_.scale();
  float* grads = grad_partition();
  const size_t count = grad_partition_numel();

  // Sum of squares of this rank's partition, summed over ranks (stage 0: every rank holds all).
  double sum_sq = kernels::sum_of_squares(kernels::DType::F32, grads, count);
  if (options_.stage > 0) {
    float total = static_cast<float>(sum_sq);
    comm_.allreduce(&total, 1, kernels::DType::F32, kernels::ReduceOp::Sum)->wait(options_.comm_timeout);
    sum_sq = total;
  }
  const bool finite = std::isfinite(sum_sq);
  if (!finite && options_.check_overflow) {
    scaler_.update(true);  // may throw at the minimum scale (ZeRO)
    zero_grads();
    result.applied = false;
    result.grad_norm = -1.0;
    return result;
  }
  result.grad_norm = finite ? std::sqrt(sum_sq) / result.loss_scale : -1.0;

  // Unscale and clip in one factor (DeepSpeed's ZeRO formula), with the scale backward used.
  double combined = result.loss_scale;
  if (options_.gradient_clipping > 0.0 && finite) {
    const double c = (result.grad_norm + 1e-6) / options_.gradient_clipping;
    if (c > 1.0) {
      combined *= c;
      result.clip_coefficient = 1.0 / c;
    }
  }
  auto sum_across_ranks = [this](double* values, size_t n) {
    if (options_.stage == 0) return;
    std::vector<float> f(values, values + n);
    comm_.allreduce(f.data(), n, kernels::DType::F32, kernels::ReduceOp::Sum)->wait(options_.comm_timeout);
    for (size_t i = 0; i < n; ++i) values[i] = f[i];
  };
  optimizer_->step(master_partition(), grads, static_cast<float>(1.0 / combined), hyper, sum_across_ranks);
  scaler_.update(false);
  sync_full_params();
  zero_grads();
  result.applied = true;
  return result;
}

// After the optimizer changed this rank's partition, everyone's full copy catches up.
void ZeroEngine::sync_full_params() {
  if (flat_) {
    allgather_partitions(*flat_, plan_allgather(*flat_, options_.allgather_bucket_size), params_full_.data(), comm_,
                         ledger_, options_.comm_timeout);
  } else if (gatherer_) {
    gatherer_->invalidate();
  }
}

void ZeroEngine::load_master_partition(const float* values) {
  std::memcpy(master_partition(), values, master_numel() * sizeof(float));
  sync_full_params();
}

void ZeroEngine::gather_params(float* model_flat) {
  const float* full = params_full_.data();
  std::vector<float> gathered;
  if (gatherer_) {
    gathered.resize(layout_.numel());
    gatherer_->gather_all(gathered.data());
    full = gathered.data();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    std::memcpy(model_flat + params_[i].model_offset, full + layout_.flat_offset(i),
                params_[i].info.numel * sizeof(float));
  }
}

// ---- re-cutting partitions ----

size_t ZeroEngine::partition_numel_of(const ZeroLayout& layout, int stage, int world, int rank) {
  const std::vector<size_t> numels = layout.numels_in_order();
  if (stage == 0) return layout.numel();
  if (stage == 3) return ShardedParams(numels, world).partition_numel();
  (void)rank;
  return FlatPartition(numels, world).partition_numel();
}

void ZeroEngine::scatter_partition(const ZeroLayout& layout, int stage, int world, int rank, const float* partition,
                                   float* full) {
  const std::vector<size_t> numels = layout.numels_in_order();
  if (stage == 0) {
    std::memcpy(full, partition, layout.numel() * sizeof(float));
  } else if (stage == 3) {
    ShardedParams shards(numels, world);
    for (size_t p = 0; p < layout.num_params(); ++p) {
      std::memcpy(full + layout.offset_at(p) + shards.shard_numel(p) * static_cast<size_t>(rank),
                  partition + shards.shard_offset(p), shards.real_in_shard(p, rank) * sizeof(float));
    }
  } else {
    FlatPartition flat(numels, world);
    const size_t begin = flat.partition_begin(rank);
    const size_t end = std::min(begin + flat.partition_numel(), layout.numel());
    if (end > begin) std::memcpy(full + begin, partition, (end - begin) * sizeof(float));
  }
}

void ZeroEngine::take_partition(const float* full, float* partition) const {
  const int rank = comm_.rank();
  std::memset(partition, 0, master_numel() * sizeof(float));
  if (options_.stage == 0) {
    std::memcpy(partition, full, layout_.numel() * sizeof(float));
  } else if (shards_) {
    for (size_t p = 0; p < layout_.num_params(); ++p) {
      std::memcpy(partition + shards_->shard_offset(p), full + layout_.offset_at(p) + shards_->shard_numel(p) * rank,
                  shards_->real_in_shard(p, rank) * sizeof(float));
    }
  } else {
    const size_t begin = flat_->partition_begin(rank);
    const size_t end = std::min(begin + flat_->partition_numel(), layout_.numel());
    if (end > begin) std::memcpy(partition, full + begin, (end - begin) * sizeof(float));
  }
}

}  // namespace dsx::zero
