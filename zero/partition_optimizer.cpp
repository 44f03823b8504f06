// Runs the fused optimizer kernels over one rank's partition (see partition_optimizer.h).
#include "zero/partition_optimizer.h"

#include <algorithm>
#include <chrono>

#include "dsx/error.h"
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

// NVMe swapping steps the state one sub-group at a time in host memory.
void check_swappable(const OptimizerSpec& spec, const device::Device& device) {
  if (spec.type == OptimizerType::Lamb) {
    throw Error(ErrorKind::Unsupported,
                "zero_optimization.offload_optimizer.device \"nvme\" with LAMB: LAMB needs every tensor's whole "
                "state twice per step (its trust ratio), which dsx does not swap. Use Adam/AdamW, Lion, SGD or "
                "Adagrad, or offload_optimizer.device \"cpu\"");
  }
  if (!device.host_accessible()) {
    throw Error(ErrorKind::Unsupported, "zero_optimization.offload_optimizer.device \"nvme\" on " + device.name() +
                                            ": dsx swaps optimizer state for host-memory ranks only. Run on the "
                                            "CPU, or use offload_optimizer.device \"none\"");
  }
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
                                       device::Stream& stream, const std::optional<OptimizerSwapOptions>& nvme,
                                       int rank)
    : spec_(spec), device_(device), stream_(stream), ledger_(ledger), numel_(numel), segments_(std::move(segments)),
      num_tensors_(num_tensors) {
  if (nvme) {
    check_swappable(spec, device);
    // DeepSpeed's optimizer swapper holds the fp32 parameters with the state (ref §3.2): the
    // master partition is the first swapped tensor.
    std::vector<std::string> tensors = state_names();
    if (nvme->swap_master) tensors.insert(tensors.begin(), "fp32_master");
    master_index_ = nvme->swap_master ? 1 : 0;
    swapper_ = std::make_unique<OptimizerSwapper>(*nvme, tensors, numel, rank, ledger);
    return;
  }
  const size_t tensors = state_tensors(spec.type, spec);
  if (tensors >= 1) state_a_ = Buffer<float>(device, stream, ledger, MemoryKind::OptimizerState, numel);
  if (tensors >= 2) state_b_ = Buffer<float>(device, stream, ledger, MemoryKind::OptimizerState, numel);
}

size_t PartitionOptimizer::state_bytes_per_element() const {
  return 4 * state_tensors(spec_.type, spec_);
}

std::vector<std::string> PartitionOptimizer::state_names() const {
  switch (spec_.type) {
    case OptimizerType::Adam:
    case OptimizerType::Lamb: return {"exp_avg", "exp_avg_sq"};
    case OptimizerType::Lion: return {"exp_avg"};
    case OptimizerType::Adagrad: return {"sum"};
    case OptimizerType::Sgd: return spec_.sgd.momentum != 0.0f ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  }
  return {};
}

void PartitionOptimizer::copy_state_out(size_t index, float* host) {
  if (swapper_) return swapper_->read_state(index + master_index_, host);
  device_.copy(host, state()[index].second->data(), numel_ * sizeof(float), stream_);
}

void PartitionOptimizer::copy_state_in(size_t index, const float* host) {
  if (swapper_) return swapper_->write_state(index + master_index_, host);
  device_.copy(state()[index].second->data(), host, numel_ * sizeof(float), stream_);
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

void PartitionOptimizer::step(float* param, const float* grad, kernels::GradFactor grad_factor,
                              const StepHyper& hyper,
                              const std::function<void(double*, size_t)>& sum_across_ranks,
                              kernels::ParamCopy copy) {
  ++steps_;
  if (spec_.type == OptimizerType::Lamb) {
    step_lamb(param, grad, grad_factor, scheduled(spec_.lamb, hyper), sum_across_ranks, copy);
  } else if (swapper_) {
    // Sub-group by sub-group; its buffers are written back once the kernels have run.
    swapper_->for_each_group([&](const OptimizerSwapper::Group& g) {
      // The group's tensors: [fp32 master,] then the state.
      float* master = master_index_ ? g.state[0] : param + g.begin;
      const size_t n = g.state.size() - master_index_;
      step_range(master, grad, grad_factor, hyper, copy, g.begin, g.begin + g.count,
                 n > 0 ? g.state[master_index_] : nullptr, n > 1 ? g.state[master_index_ + 1] : nullptr);
      stream_.synchronize(std::chrono::minutes(5));
      if (group_stepped_) group_stepped_(g.begin, g.count, master);
    });
  } else {
    step_range(param, grad, grad_factor, hyper, copy, 0, numel_, state_a_.data(), state_b_.data());
  }
}

void PartitionOptimizer::copy_master_out(float* host) { swapper_->read_state(0, host); }

void PartitionOptimizer::copy_master_in(const float* host) { swapper_->write_state(0, host); }

void PartitionOptimizer::step_range(float* param_lo, const float* grad, kernels::GradFactor grad_factor,
                                    const StepHyper& hyper, kernels::ParamCopy copy, size_t lo, size_t hi, float* a,
                                    float* b) {
  // The master of element begin (param_lo holds element lo).
  auto param_at = [param_lo, lo](size_t begin) { return param_lo + (begin - lo); };
  // The working copy of elements [begin, ...) of the partition.
  auto copy_at = [copy](size_t begin) {
    kernels::ParamCopy c = copy;
    if (c.data) c.data = static_cast<uint8_t*>(c.data) + begin * kernels::dtype_size(c.dtype);
    return c;
  };
  auto state_at = [lo](float* s, size_t begin) { return s ? s + (begin - lo) : nullptr; };
  // Runs step(run_hyper, begin, count) over each run of equal decay within [lo, hi), weight
  // decay off where the tensors take none (biases, norms).
  auto for_each_run = [&](const auto& h, const auto& step) {
    for_each_decay_run(segments_, [&](size_t begin, size_t count, bool decay) {
      const size_t from = std::max(begin, lo);
      const size_t to = std::min(begin + count, hi);
      if (from >= to) return;
      auto run = h;
      if (!decay) run.weight_decay = 0;
      step(run, from, to - from);
    });
  };
  switch (spec_.type) {
    case OptimizerType::Adam:
      for_each_run(scheduled(spec_.adam, hyper), [&](const kernels::AdamHyper& h, size_t begin, size_t count) {
        device_.adam_step(h, steps_, grad_factor, param_at(begin), grad + begin, state_at(a, begin),
                          state_at(b, begin), count, copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Lion:
      for_each_run(scheduled(spec_.lion, hyper), [&](const kernels::LionHyper& h, size_t begin, size_t count) {
        device_.lion_step(h, grad_factor, param_at(begin), grad + begin, state_at(a, begin), count, copy_at(begin),
                          stream_);
      });
      break;
    case OptimizerType::Sgd:
      for_each_run(scheduled(spec_.sgd, hyper), [&](const kernels::SgdHyper& h, size_t begin, size_t count) {
        device_.sgd_step(h, steps_, grad_factor, param_at(begin), grad + begin, state_at(a, begin), count,
                         copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Adagrad:
      for_each_run(scheduled(spec_.adagrad, hyper), [&](const kernels::AdagradHyper& h, size_t begin, size_t count) {
        device_.adagrad_step(h, grad_factor, param_at(begin), grad + begin, state_at(a, begin), count,
                             copy_at(begin), stream_);
      });
      break;
    case OptimizerType::Lamb: break;  // step_lamb
  }
}

// LAMB: the trust ratio of a tensor needs ||p|| and ||u|| of the whole tensor, so each rank sums
// the squares of its pieces per tensor, the ranks add them up, and then every rank applies. The
// pieces' sums come to the host (one synchronisation per step) and go back as one table.
void PartitionOptimizer::step_lamb(float* param, const float* grad, kernels::GradFactor grad_factor,
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
