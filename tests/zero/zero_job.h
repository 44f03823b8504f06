// A tiny GPT-2 trained by real ranks through ZeRO, and the same training done plainly in one
// process (the reference every stage must reproduce): full batch, averaged gradients, AdamW
// over the model's flat buffer.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/zero_model_access.h"
#include "kernels/optimizers.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/local_params.h"
#include "zero/zero_engine.h"

namespace dsx::test {

inline models::GPT2Config tiny_gpt2() {
  models::GPT2Config c;
  c.max_seq_len = 16;
  c.vocab_size = 96;
  c.padded_vocab_size = models::padded_vocab(96);
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 32;
  return c;
}

// Micro-batch `index` of the global data: B rows of T tokens, deterministic.
struct Batch {
  std::vector<int32_t> inputs, targets;
};
inline Batch make_batch(int index, int B, int T, int vocab) {
  std::mt19937 rng(1234u + static_cast<uint32_t>(index));
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  Batch b;
  for (int i = 0; i < B * T; ++i) {
    b.inputs.push_back(token(rng));
    b.targets.push_back(token(rng));
  }
  return b;
}

inline kernels::AdamHyper test_adam() {
  kernels::AdamHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  return h;
}

// The reference: `steps` optimizer steps over `micro_batches` micro-batches each (the whole
// global batch in one process), gradients averaged, AdamW with decay only where ParamSpec says.
inline std::vector<float> reference_training(int steps, int micro_batches, int B, int T) {
  const auto config = tiny_gpt2();
  models::GPT2Cpu<float> model(config, B, T);
  models::LocalParams<float> local(model);
  model.init_params(local.params(), 42);
  std::vector<float> m(local.size(), 0.0f), v(local.size(), 0.0f);
  for (int step = 0; step < steps; ++step) {
    local.zero_grads();
    for (int i = 0; i < micro_batches; ++i) {
      Batch b = make_batch(step * micro_batches + i, B, T, config.vocab_size);
      model.forward(b.inputs.data(), b.targets.data(), B, T, local);
      model.backward(local, local, 1.0f / static_cast<float>(micro_batches));
    }
    for (const models::ParamSpec& spec : model.params()) {
      kernels::AdamHyper h = test_adam();
      if (!spec.decay) h.weight_decay = 0;
      kernels::adam_step(h, step + 1, 1.0f, local.params() + spec.offset, local.grads() + spec.offset,
                         m.data() + spec.offset, v.data() + spec.offset, spec.numel);
    }
  }
  return std::vector<float>(local.params(), local.params() + local.size());
}

// The same training on one rank of a ZeRO job: micro-batch j of step s on rank r is global
// micro-batch s * (gas * world) + j * world + r. Returns the full parameters (every rank).
inline std::vector<float> zero_training(comm::Communicator& comm, const zero::ZeroOptions& options, int steps,
                                        int gas, int B, int T) {
  const auto config = tiny_gpt2();
  models::GPT2Cpu<float> model(config, B, T);
  std::vector<float> initial(model.num_params());
  model.init_params(initial.data(), 42);
  zero::ZeroEngine zero(engine::zero_params_of(model), model.num_layers(), initial.data(), options, comm);
  const int world = comm.size();
  for (int step = 0; step < steps; ++step) {
    for (int j = 0; j < gas; ++j) {
      Batch b = make_batch(step * gas * world + j * world + comm.rank(), B, T, config.vocab_size);
      engine::train_micro_step(model, zero, b.inputs.data(), b.targets.data(), B, T, j == gas - 1,
                               static_cast<float>(zero.loss_scale() / gas));
    }
    zero::StepHyper hyper;
    hyper.lr = options.optimizer.adam.lr;
    zero.step(hyper);
  }
  std::vector<float> full(model.num_params());
  zero.gather_params(full.data());
  return full;
}

}  // namespace dsx::test
