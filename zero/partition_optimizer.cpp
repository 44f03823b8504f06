// Runs the fused optimizer kernels over one rank's partition (see partition_optimizer.h).
#include "zero/partition_optimizer.h"

#include <algorithm>
#include <chrono>

#include "kernels/optimizers.h"

namespace dsx::zero {
namespace {

size_t state_tensors(OptimizerType type, const OptimizerSpec& spec) {
  switch (type) {
    case OptimizerType::Adam:
    case OptimizerType::Lamb: return 2;
    case OptimizerType::Lion:
    case OptimizerType::Adagrad: return 1;
    case OptimizerType::Sgd: return spec.sgd.momentum != 0.0f ? 1 : 0;
  }
  return 0;
}

// Consecutive segments with the same decay flag, merged: one kernel call each.
template <class Fn>
void for_each_decay_run(const std::vector<Segment>& segments, Fn&& fn) {
  size_t i = 0;
  while (i < segments.size()) {
    size_t j = i + 1;
    size_t end = segments[i].begin + segments[i].count;
    while (j < segments.size() && segments[j].decay == segments[i].decay && segments[j].begin == end) {
      end += segments[j].count;
      ++j;
    }
    fn(segments[i].begin, end - segments[i].begin, segments[i].decay);
    i = j;
  }
}

// The spec's hyper-parameters with this step's lr and, for optimizers with betas, the
// scheduler's betas (OneCycle's momentum cycling).
template <class H>
H scheduled(H h, const StepHyper& hyper) {
  h.lr = static_cast<float>(hyper.lr);
  if constexpr (requires { h.beta1; }) {
    if (hyper.beta1) h.beta1 = static_cast<float>(*hyper.beta1);
    if (hyper.beta2) h.beta2 = static_cast<float>(*hyper.beta2);
  }
  return h;
}

}  // namespace

const char* optimizer_type_name(OptimizerType type) {
  switch (type) {
    case OptimizerType::Adam: return "adam";
    case OptimizerType::Lamb: return "lamb";
    case OptimizerType::Lion: return "lion";
    case OptimizerType::Sgd: return "sgd";
    case OptimizerType::Adagrad: return "adagrad";
  }
  return "?";
}

double OptimizerSpec::lr() const {
  switch (type) {
    case OptimizerType::Adam: return adam.lr;
    case OptimizerType::Lamb: return lamb.lr;
    case OptimizerType::Lion: return lion.lr;
    case OptimizerType::Sgd: return sgd.lr;
    case OptimizerType::Adagrad: return adagrad.lr;
  }
  return 0;
}

double OptimizerSpec::weight_decay() const {
  switch (type) {
    case OptimizerType::Adam: return adam.weight_decay;
    case OptimizerType::Lamb: return lamb.weight_decay;
    case OptimizerType::Lion: return lion.weight_decay;
    case OptimizerType::Sgd: return sgd.weight_decay;
    case OptimizerType::Adagrad: return adagrad.weight_decay;
  }
  return 0;
}

PartitionOptimizer::PartitionOptimizer(const OptimizerSpec& spec, size_t numel, std::vector<Segment> segments,
                                       size_t num_tensors, MemoryLedger& ledger, device::Device& device,
                                       device::Stream& stream)
    : spec_(spec), device_(device), stream_(stream), ledger_(ledger), numel_(numel), segments_(std::move(segments)),
      num_tensors_(num_tensors) {
  const size_t tensors = state_tensors(spec.type, spec);
  if (tensors >= 1) state_a_ = Buffer<float>(device, stream, ledger, MemoryKind::OptimizerState, numel);
  if (tensors >= 2) state_b_ = Buffer<float>(device, stream, ledger, MemoryKind::OptimizerState, numel);
}

size_t PartitionOptimizer::state_bytes_per_element() const {
  return 4 * state_tensors(spec_.type, spec_);
}

std::vector<std::pair<std::string, Buffer<float>*>> PartitionOptimizer::state() {
  switch (spec_.type) {
    case OptimizerType::Adam:
    case OptimizerType::Lamb: return {{"exp_avg", &state_a_}, {"exp_avg_sq", &state_b_}};
    case OptimizerType::Lion: return {{"exp_avg", &state_a_}};
    case OptimizerType::Adagrad: return {{"sum", &state_a_}};
    case OptimizerType::Sgd:
      if (state_a_.empty()) return {};
      return {{"momentum_buffer", &state_a_}};
  }
  return {};
}

void PartitionOptimizer::step(float* param, const float* grad, float grad_factor, const StepHyper& hyper,
                              const std::function<void(double*, size_t)>& sum_across_ranks, kernels::ParamCopy copy) {
  // The working copy of elements [begin, ...) of the partition.
  auto copy_at = [copy](size_t begin) {
    kernels::ParamCopy c = copy;
    if (c.data) c.data = static_cast<uint8_t*>(c.data) + begin * kernels::dtype_size(c.dtype);
    return c;
  };
  ++steps_;
  float* a = state_a_.data();
  float* b = state_b_.data();
  // Runs step(run_hyper, begin, count) over each run of equal decay, weight decay off where the
  // tensors take none (biases, norms).
  auto for_each_run = [&](const auto& h, const auto& step) {
    for_each_decay_run(segments_, [&](size_t begin, size_t count, bool decay) {
      auto run = h;
      if (!decay) run.weight_decay = 0;
      step(run, begin, count);
    });
  };
  switch (spec_.type) {
    case OptimizerType::Adam:
      for_each_run(scheduled(spec_.adam, hyper), [&](const kernels::AdamHyper& h, size_t begin, size_t count) {
        device_.adam_step(h, steps_, grad_factor, param + begin, grad + begin, a + begin, b + begin, count,
                          copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Lion:
      for_each_run(scheduled(spec_.lion, hyper), [&](const kernels::LionHyper& h, size_t begin, size_t count) {
        device_.lion_step(h, grad_factor, param + begin, grad + begin, a + begin, count, copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Sgd:
      for_each_run(scheduled(spec_.sgd, hyper), [&](const kernels::SgdHyper& h, size_t begin, size_t count) {
        device_.sgd_step(h, steps_, grad_factor, param + begin, grad + begin, a ? a + begin : nullptr, count,
                         copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Adagrad:
      for_each_run(scheduled(spec_.adagrad, hyper), [&](const kernels::AdagradHyper& h, size_t begin, size_t count) {
        device_.adagrad_step(h, grad_factor, param + begin, grad + begin, a + begin, count, copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Lamb:
      step_lamb(param, grad, grad_factor, scheduled(spec_.lamb, hyper), sum_across_ranks, copy);
      break;
  }
}

// LAMB: the trust ratio of a tensor needs ||p|| and ||u|| of the whole tensor, so each rank sums
// the squares of its pieces per tensor, the ranks add them up, and then every rank applies. The
// pieces' sums come to the host (one synchronisation per step) and go back as one table.
void PartitionOptimizer::step_lamb(float* param, const float* grad, float grad_factor,
                                   const kernels::LambHyper& hyper,
                                   const std::function<void(double*, size_t)>& sum_across_ranks,
                                   kernels::ParamCopy copy) {
  float* a = state_a_.data();
  float* b = state_b_.data();
  const size_t n = segments_.size();
  Buffer<double> pieces(device_, stream_, ledger_, MemoryKind::Buffers, 2 * n);
  for (size_t i = 0; i < n; ++i) {
    const Segment& s = segments_[i];
    kernels::LambHyper h = hyper;
    if (!s.decay) h.weight_decay = 0;
    device_.lamb_prepare(h, steps_, grad_factor, param + s.begin, grad + s.begin, a + s.begin, b + s.begin, s.count,
                         pieces.data() + 2 * i, stream_);
  }
  std::vector<double> piece_sums(2 * n);
  device_.copy(piece_sums.data(), pieces.data(), 2 * n * sizeof(double), stream_);
  stream_.synchronize(std::chrono::minutes(5));
  std::vector<double> sums(2 * num_tensors_, 0.0);
  for (size_t i = 0; i < n; ++i) {
    sums[2 * segments_[i].tensor] += piece_sums[2 * i];
    sums[2 * segments_[i].tensor + 1] += piece_sums[2 * i + 1];
  }
  sum_across_ranks(sums.data(), sums.size());
  Buffer<double> totals(device_, stream_, ledger_, MemoryKind::Buffers, sums.size());
  device_.copy(totals.data(), sums.data(), sums.size() * sizeof(double), stream_);
  for (const Segment& s : segments_) {
    kernels::LambHyper h = hyper;
    if (!s.decay) h.weight_decay = 0;
    kernels::ParamCopy c = copy;
    if (c.data) c.data = static_cast<uint8_t*>(c.data) + s.begin * kernels::dtype_size(c.dtype);
    device_.lamb_apply(h, steps_, param + s.begin, a + s.begin, b + s.begin, s.count, totals.data() + 2 * s.tensor, c,
                       stream_);
  }
  // `sums` is host memory the copy reads: it must land before the vector goes.
  stream_.synchronize(std::chrono::minutes(5));
}

}  // namespace dsx::zero
