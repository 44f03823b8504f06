// Per-parameter accounting (bytes, mixed precision): 16-bit params 2, 16-bit grads 2, and per
// partitioned element fp32 grads 4 + fp32 master 4 + Adam m and v 8 = 16; DeepSpeed's "18" is
// these 16 plus the 16-bit grad. fp32 training has no master copy and no second grad copy:
// params 4, grads 4, Adam 8.
#include "tools/estimate/memory_model.h"

#include <algorithm>

#include "dsx/error.h"

namespace dsx::estimate {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
    case Precision::Fp32: return "fp32";
  }
  return "?";
}

const char* to_string(Offload o) {
  switch (o) {
    case Offload::None: return "none";
    case Offload::Optimizer: return "optimizer";
    case Offload::OptimizerAndParams: return "optimizer+param";
    case Offload::OptimizerNvme: return "nvme";
    case Offload::OptimizerAndParamsNvme: return "nvme+param";
  }
  return "?";
}

bool offloads_params(Offload o) {
  return o == Offload::OptimizerAndParams || o == Offload::OptimizerAndParamsNvme;
}

bool offloads_to_nvme(Offload o) {
  return o == Offload::OptimizerNvme || o == Offload::OptimizerAndParamsNvme;
}

std::vector<ZeroOption> zero_options(const std::vector<int>& stages,
                                     const std::vector<Offload>& offloads,
                                     const std::vector<Method>& methods) {
  std::vector<ZeroOption> options;
  // Below stage 3 an adapter run's rows differ only in how a few MB of adapter state split, so
  // the lowest requested stage below 3 stands for them.
  int below_3 = 3;
  for (int stage : stages) below_3 = std::min(below_3, stage);
  const bool stage_3 = std::find(stages.begin(), stages.end(), 3) != stages.end();
  for (Method method : methods) {
    if (method != Method::Full) {
      if (below_3 < 3) options.push_back({below_3, Offload::None, method});
      if (stage_3) options.push_back({3, Offload::None, method});
      continue;
    }
    for (int stage : stages) {
      for (Offload offload : offloads) {
        if (stage == 0 && offload != Offload::None) continue;
        if (stage < 3 && (offloads_params(offload) || offloads_to_nvme(offload))) continue;
        options.push_back({stage, offload, method});
      }
    }
  }
  return options;
}

namespace {

constexpr const char* kDeepSpeedZero2 = "deepspeed estimate_zero2_model_states_mem_needs";
constexpr const char* kDeepSpeedZero3 = "deepspeed estimate_zero3_model_states_mem_needs";
constexpr const char* kDsxFormula = "dsx (DeepSpeed's per-parameter terms, see docs/estimate.md)";

int64_t weight_bytes(Precision p) { return p == Precision::Fp32 ? 4 : 2; }

// Bytes per parameter that ZeRO partitions across GPUs besides the weights: the optimizer
// side (fp32 grads, master, m, v; or just m, v in fp32 training) and, from stage 2 on, the
// 16-bit gradient as well.
int64_t optimizer_bytes(Precision p) { return p == Precision::Fp32 ? 8 : 16; }

int64_t per_gpu(int64_t bytes_per_param, int64_t params, int64_t gpus) {
  return static_cast<int64_t>(static_cast<double>(bytes_per_param * params) /
                              static_cast<double>(gpus));
}

}  // namespace

ModelStateBytes model_state_bytes(int64_t P, int64_t L, Precision precision, const Cluster& c,
                                  ZeroOption opt, bool zero_init, double f, const char** formula) {
  const bool mixed = precision != Precision::Fp32;
  const bool offload = opt.offload != Offload::None;
  const int64_t wb = weight_bytes(precision), G = c.total_gpus();
  const int64_t X = optimizer_bytes(precision), S = wb + X;
  const char* source = kDsxFormula;
  // DeepSpeed's CPU figures: the fp32 model on the host at start-up, or the offloaded states.
  ModelStateBytes m = deepspeed_zero2_model_states(P, c.gpus_per_node, c.nodes, offload, f);
  switch (opt.stage) {
    case 0:
      m.gpu = wb * P + S * P;
      break;
    case 1:
      m.gpu = offload ? 2 * wb * P : 2 * wb * P + per_gpu(X, P, G);
      break;
    case 2:
      if (mixed) {
        source = kDeepSpeedZero2;
      } else {
        m.gpu = offload ? wb * P : wb * P + per_gpu(S, P, G);
      }
      break;
    case 3: {
      // fp32 has no separate 16-bit copy to offload with the parameters: its CPU side is the
      // optimizer-offload figure.
      const bool offload_params = offloads_params(opt.offload);
      m = deepspeed_zero3_model_states(P, L, c.gpus_per_node, c.nodes, offload,
                                       offload_params && mixed, zero_init, f);
      if (mixed) {
        source = kDeepSpeedZero3;
      } else {
        const int64_t layer = 2 * wb * L;
        m.gpu = offload_params ? layer : layer + per_gpu(offload ? wb : S, P, G);
      }
      break;
    }
    default:
      throw Error(ErrorKind::Usage,
                  "ZeRO stage " + std::to_string(opt.stage) + " does not exist; use 0, 1, 2 or 3");
  }
  if (formula) *formula = source;
  return m;
}

namespace {

// reduced: the parameters whose gradients are reduced (all, or the adapters'); gathered: those
// stage 3 gathers (all).
int64_t buffer_bytes(const EstimateRequest& r, int stage, int64_t reduced, int64_t gathered) {
  const int64_t wb = weight_bytes(r.precision);
  // A bucket never needs to hold more than the whole model.
  const int64_t reduce = std::min(reduced, r.reduce_bucket_size) * wb;
  if (stage == 3) return reduce + std::min(gathered, r.prefetch_bucket_size) * wb;
  // Below stage 3, overlap_comm double-buffers the bucket.
  return r.overlap_comm.value_or(config::default_overlap_comm(stage)) ? 2 * reduce : reduce;
}

}  // namespace

void validate(const EstimateRequest& r) {
  validate(r.model);
  const auto& a = r.activations;
  if (a.seq_len < 1 || a.micro_batch < 1 || r.cluster.gpus_per_node < 1 || r.cluster.nodes < 1) {
    throw Error(ErrorKind::Config,
                "sequence length, micro-batch, GPUs per node and nodes must be at least 1");
  }
  // The same sums in floating point, only to see that the exact ones cannot overflow.
  const double tokens = static_cast<double>(a.seq_len) * static_cast<double>(a.micro_batch);
  const double per_token =
      static_cast<double>(r.model.layers) * 16.0 *
          static_cast<double>(r.model.hidden + r.model.intermediate + r.model.heads * a.seq_len) +
      8.0 * static_cast<double>(r.model.vocab);
  const double params = static_cast<double>(parameter_count(r.model));
  constexpr double kExabyte = 1e18;
  if (tokens * per_token > kExabyte || 24.0 * params > kExabyte ||
      static_cast<double>(r.cluster.gpus_per_node) * static_cast<double>(r.cluster.nodes) > 1e6) {
    throw Error(ErrorKind::Config,
                "this model, batch and cluster need more than an exabyte per GPU or a million "
                "GPUs; check --seq-len, --micro-batch, the model's sizes and the GPU counts");
  }
}

namespace {

// ZeRO-Infinity: the optimizer side (fp32 master, m, v and the fp32 gradient, 16 bytes a
// parameter) and, with param offload, the 16-bit parameters live in swap files on each node's
// NVMe; host memory holds each rank's pinned swap buffers. The GPU side is DeepSpeed's figure
// for the same offload to the CPU.
void apply_nvme(const EstimateRequest& r, int64_t params, ZeroOption option, MemoryEstimate& e) {
  const Cluster& c = r.cluster;
  const int64_t per_rank = (params + c.total_gpus() - 1) / c.total_gpus();
  int64_t pinned = r.optimizer_buffer_count * std::min(r.sub_group_size, per_rank) * 4;
  int64_t on_disk = 16 * params;
  if (offloads_params(option.offload)) {
    pinned += r.param_buffer_count * r.param_buffer_size * weight_bytes(r.precision);
    on_disk += weight_bytes(r.precision) * params;
  }
  e.cpu_model_states = c.gpus_per_node * pinned;
  e.nvme_per_node = on_disk / c.nodes;
}

// LoRA / QLoRA: the frozen base (16-bit or NF4; partitioned at stage 3, the largest layer
// gathered whole) and the adapters with full fine-tuning's per-parameter terms, which ZeRO
// partitions as it partitions any trained parameter: optimizer states from stage 1, gradients
// from stage 2, the weights at stage 3. The host maps the base file once per node.
ModelStateBytes adapter_states(const EstimateRequest& r, ZeroOption option, int64_t adapter) {
  const int64_t wb = weight_bytes(r.precision), G = r.cluster.total_gpus();
  const int64_t base = frozen_base_bytes(r.model, option.method, r.adapter.double_quant, wb);
  const auto share = [&](int from_stage, int64_t bytes_per_param) {
    return option.stage >= from_stage ? per_gpu(bytes_per_param, adapter, G) : bytes_per_param * adapter;
  };
  ModelStateBytes m;
  m.gpu = option.stage == 3 ? base / G + wb * largest_layer_params(r.model) : base;
  m.gpu += share(3, wb) + share(2, wb) + share(1, optimizer_bytes(r.precision));
  m.cpu_per_node = base;
  return m;
}

// What forward keeps of each adapter: x A (r values a token) for B's gradient.
int64_t adapter_activation_bytes(const EstimateRequest& r, const ActivationOptions& act) {
  const int64_t modules = static_cast<int64_t>(lora_targets(r.model, r.adapter).size());
  const int64_t blocks = act.checkpointing ? 1 : r.model.layers;
  return act.seq_len * act.micro_batch * r.adapter.r * modules * blocks * act.bytes_per_value;
}

}  // namespace

MemoryEstimate estimate_memory(const EstimateRequest& r, ZeroOption option) {
  const int64_t params = parameter_count(r.model);
  const bool adapters = option.method != Method::Full;
  MemoryEstimate e;
  e.option = option;
  e.trainable_params = adapters ? lora_params(r.model, r.adapter) : params;
  auto states = adapters ? adapter_states(r, option, e.trainable_params)
                         : model_state_bytes(params, largest_layer_params(r.model), r.precision,
                                             r.cluster, option, r.zero_init, r.buffer_factor,
                                             &e.model_states_formula);
  if (adapters) e.model_states_formula = "dsx frozen base + adapters (docs/fit_your_model.md)";
  e.gpu_model_states = states.gpu;
  e.cpu_model_states = states.cpu_per_node;
  if (offloads_to_nvme(option.offload)) apply_nvme(r, params, option, e);
  ActivationOptions act = r.activations;
  act.bytes_per_value = weight_bytes(r.precision);
  const int64_t adapter_act = adapters ? adapter_activation_bytes(r, act) : 0;
  e.gpu_activations = activation_bytes(r.model, act).total() + adapter_act;
  e.gpu_buffers = buffer_bytes(r, option.stage, e.trainable_params, params);
  e.gpu_reserve = r.reserve_bytes;
  e.fits_gpu = e.gpu_total() <= r.gpu_memory_bytes;
  e.fits_cpu =
      r.cpu_memory_per_node_bytes == 0 || e.cpu_model_states <= r.cpu_memory_per_node_bytes;

  act.micro_batch = 1;
  const int64_t per_sample = activation_bytes(r.model, act).total() + adapter_act / r.activations.micro_batch;
  const int64_t room = r.gpu_memory_bytes - e.gpu_model_states - e.gpu_buffers - e.gpu_reserve;
  e.max_micro_batch = room > 0 && per_sample > 0 ? room / per_sample : 0;
  return e;
}

std::optional<Cluster> fewest_gpus(const EstimateRequest& request, ZeroOption option,
                                   int64_t max_gpus) {
  const int64_t per_node = request.cluster.gpus_per_node;
  EstimateRequest trial = request;
  for (int64_t gpus = 1; gpus <= max_gpus; gpus = gpus < per_node ? gpus + 1 : gpus + per_node) {
    trial.cluster = gpus <= per_node ? Cluster{gpus, 1} : Cluster{per_node, gpus / per_node};
    if (estimate_memory(trial, option).fits()) return trial.cluster;
  }
  return std::nullopt;
}

}  // namespace dsx::estimate
