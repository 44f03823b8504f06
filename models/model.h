// The Model seam (DESIGN.md §3): what a trainable model tells the engine and how the engine feeds
// it parameters and takes its gradients. A model owns its activations, never its parameters.
//
// Parameters live in ONE flat buffer in the order of Model::params() (llm.c-style, so a GPT-2
// checkpoint body is exactly this buffer). Every parameter belongs to one "layer", the unit in
// which forward and backward run and in which ZeRO gathers, prefetches, releases and reduces:
//
//   forward:   for each layer l in order:   access.acquire(l), access.prefetch(next), compute,
//                                            access.release(l)
//   backward:  for each layer l in reverse: access.acquire(l), access.prefetch(next), compute,
//                                            sink.ready(l), access.release(l)
//
// A layer's gradients are final when sink.ready(l) is called: the sink may reduce them at once
// (bucket, allreduce / reduce-scatter) while backward continues with the layers below. The model
// never touches a layer's gradient memory after ready(l) of that micro-batch.
//
// Every acquire(l) is paired with a release(l) within the same forward (or backward) call. A
// layer may be acquired while another is: GPT-2's head is tied to the token embedding, so layer 0
// stays acquired from the embedding to the head in forward, and from the head to the embedding
// in backward (ZeRO stage 3 may simply keep such a layer resident).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace dsx::models {

// One parameter tensor: a slice [offset, offset + numel) of the flat buffer, in elements.
struct ParamSpec {
  std::string name;              // the model's own name, e.g. "h.3.attn.c_attn.weight"
  std::vector<int64_t> shape;    // row-major, PyTorch Linear layout (out, in) for matrices
  int layer = 0;                 // scheduling unit: 0 .. Model::num_layers() - 1
  bool decay = true;             // weight decay applies (2-D weights), not to biases and norms
  size_t offset = 0;             // first element in the flat buffer
  size_t numel = 0;              // product of shape
};

// Where the model reads parameters from. The engine's implementation may gather them (ZeRO
// stage 3) in acquire() and free them in release(); the simple LocalParams owner does neither.
// Addresses are host memory for CPU models and device memory for CUDA models, in the element
// type the model was built for (Model::param_dtype()).
class ParamAccess {
 public:
  virtual ~ParamAccess() = default;
  // Makes every parameter of `layer` readable until release(layer). May block (allgather).
  virtual void acquire(int layer) = 0;
  // Says that `layer` will be acquired soon, so a gather may start now. Never blocks.
  virtual void prefetch(int layer) { (void)layer; }
  // Address of the first element of parameter `index` (an index into Model::params()).
  // Only valid while that parameter's layer is acquired.
  virtual const void* param(size_t index) = 0;
  // The model is done with `layer` for now; its memory may be freed.
  virtual void release(int layer) = 0;
  // Bytes this access keeps between acquires when it holds weights of its own (a LoRA model's
  // frozen base), for the memory ledger; 0 for one that reads what ZeRO already counts.
  virtual size_t held_bytes() const { return 0; }
};

// Where the model puts gradients. Gradients ACCUMULATE (+=) into grad(index), so micro-batches
// of one step add up; zeroing between steps is the sink's job.
class GradSink {
 public:
  virtual ~GradSink() = default;
  // Address of the gradient of parameter `index`, same element type and place as the parameter.
  // Called during backward of the parameter's layer, before ready(layer).
  virtual void* grad(size_t index) = 0;
  // Every gradient of `layer` is final for this micro-batch.
  virtual void ready(int layer) = 0;
  // A model on a device enqueues its work on a stream. True: the sink orders its reads of the
  // gradients after the work the model enqueued before ready() (ZeRO on the model's own device,
  // by an event on its compute stream), so the model need not wait. False: the model waits for
  // its stream before each ready().
  virtual bool orders_after_device_work() const { return false; }
};

// A decoder language model trained with next-token cross-entropy.
class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<ParamSpec>& params() const = 0;
  // Total elements of the flat parameter buffer (sum of numel, including vocabulary padding).
  virtual size_t num_params() const = 0;
  virtual int num_layers() const = 0;
  virtual kernels::DType param_dtype() const = 0;
  virtual bool on_device() const = 0;  // parameters and gradients live in GPU memory

  // Writes freshly initialised parameters (seeded, reproducible) into a host buffer of
  // num_params() elements of param_dtype(). The engine copies or partitions it afterwards.
  virtual void init_params(void* flat, uint64_t seed) const = 0;

  // Runs the forward pass on one micro-batch of B rows of T tokens (host int32 arrays, B*T each).
  // Targets < 0 are ignored; the loss is the mean over the others. Without targets (nullptr) only
  // the logits are computed. Returns the mean loss (0 when there are no targets). Keeps what
  // backward needs. B and T may be at most the sizes the model was built for.
  virtual float forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                        ParamAccess& access) = 0;
  // A model that computes on a device may leave the loss there, so that forward() never waits
  // for the device: while kept (keep_loss_on_device(true) returned true), forward() with targets
  // returns NaN and writes the mean loss to device_loss(), one float, on the model's stream.
  virtual bool keep_loss_on_device(bool keep) {
    (void)keep;
    return false;
  }
  virtual const float* device_loss() const { return nullptr; }

  // Backward of the last forward (which must have had targets). The gradient of `grad_scale`
  // times the mean loss is accumulated into the sink: pass 1 for plain training, the loss scale
  // for fp16, 1/gradient_accumulation_steps to average micro-batches.
  virtual void backward(ParamAccess& access, GradSink& sink, float grad_scale) = 0;

  // Logits of the last forward, host copy, (B, T, vocab) with the padded columns dropped.
  virtual std::vector<float> logits() const = 0;
  virtual int vocab_size() const = 0;
  virtual int max_seq_len() const = 0;
  // Bytes of activations and scratch the model holds (allocated for its largest batch), so that
  // the engine's memory ledger and `dsx autotune` see them.
  virtual size_t activation_bytes() const = 0;
  // Bytes of frozen weights the model holds outside ZeRO (LoRA's base), charged to the ledger
  // as params.
  virtual size_t frozen_bytes() const { return 0; }
  // Floating-point operations of one forward pass over B rows of T tokens, counted from the
  // model's shape (2 per multiply-add), for the flops profiler and autotune's FLOPS_per_gpu.
  virtual double forward_flops(int64_t B, int64_t T) const = 0;
};

}  // namespace dsx::models
