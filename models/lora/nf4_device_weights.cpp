// Nf4DeviceWeights (see nf4_device_weights.h). One allocation, laid out so that every part is
// aligned for its type without padding: all absmax (fp32), then the dense tensors (T), then all
// packed codes (bytes).
#include "models/lora/nf4_device_weights.h"

#include <cstring>
#include <map>
#include <string>

#include "dsx/error.h"
#include "kernels/dtype.h"
#include "kernels/nf4_tensor.h"
#include "models/gpt2/gpt2_cuda.h"  // storage_dtype

namespace dsx::models {

namespace kc = dsx::kernels::cuda;

template <class T>
Nf4DeviceWeights<T>::Nf4DeviceWeights(device::Device& gpu, cudaStream_t stream,
                                      Nf4FrozenWeights& base, int num_layers)
    : stream_(stream) {
  const auto& specs = base.specs();
  size_t absmax_count = 0, packed_bytes = 0;
  dense_offset_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    if (const kernels::Nf4Tensor* t = base.quantized_tensor(i)) {
      absmax_count += size_t(t->blocks()), packed_bytes += t->packed.size();
    } else {
      dense_offset_[i] = dense_elements_;
      dense_elements_ += specs[i].numel;
    }
  }
  dense_at_ = absmax_count * sizeof(float);
  const size_t dense_at = dense_at_, packed_at = dense_at + dense_bytes();
  std::vector<unsigned char> host(packed_at + packed_bytes);
  constexpr kernels::DType dtype = storage_dtype<T>();
  // Where each NF4 tensor's absmax and codes go: byte offsets into the allocation.
  struct Placed {
    size_t absmax_at, packed_at;
  };
  std::map<const kernels::Nf4Tensor*, Placed> placed;
  size_t absmax_next = 0, packed_next = packed_at;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (const kernels::Nf4Tensor* t = base.quantized_tensor(i)) {
      placed[t] = {absmax_next, packed_next};
      kernels::nf4_absmax_range(reinterpret_cast<float*>(host.data() + absmax_next), *t, 0,
                                t->blocks());
      std::memcpy(host.data() + packed_next, t->packed.data(), t->packed.size());
      absmax_next += size_t(t->blocks()) * sizeof(float), packed_next += t->packed.size();
      continue;
    }
    const auto* values = static_cast<const float*>(base.param(i));
    for (size_t j = 0; j < specs[i].numel; ++j)
      kernels::store_element<dtype>(host.data() + dense_at, *dense_offset_[i] + j, values[j]);
  }
  memory_ = device::OwnedMemory(gpu, device::OwnedMemory::Kind::Device, host.size());
  gpu.copy_now(memory_.get(), host.data(), host.size());
  // Each block's projections find their weights in the device memory.
  const auto* at = memory_.as<unsigned char>();
  by_block_.resize(size_t(num_layers));
  for (int l = 0; l < num_layers; ++l)
    for (int p = 0; p < kNumProjections; ++p) {
      const kernels::Nf4Tensor* t = base.linear(l, static_cast<Projection>(p));
      if (!t) continue;
      const Placed& where = placed.at(t);
      by_block_[size_t(l)][size_t(p)] =
          kc::Nf4DeviceWeight{t->rows,
                              t->cols,
                              t->blocksize,
                              t->compute,
                              at + where.packed_at,
                              reinterpret_cast<const float*>(at + where.absmax_at)};
    }
}

template <class T>
const void* Nf4DeviceWeights<T>::param(size_t index) {
  const auto& offset = dense_offset_.at(index);
  if (!offset) return nullptr;
  return reinterpret_cast<const T*>(memory_.as<unsigned char>() + dense_at_) + *offset;
}

template <class T>
const kc::Nf4DeviceWeight* Nf4DeviceWeights<T>::weight(int block, Projection p) const {
  if (block < 0 || size_t(block) >= by_block_.size()) return nullptr;
  const auto& w = by_block_[size_t(block)][static_cast<size_t>(p)];
  return w ? &*w : nullptr;
}

template <class T>
const kc::Nf4DeviceWeight& Nf4DeviceWeights<T>::quantized_weight(int block, Projection p) const {
  if (const kc::Nf4DeviceWeight* w = weight(block, p)) return *w;
  throw Error(ErrorKind::Internal, std::string("NF4 base on the GPU: ") + projection_module(p) +
                                       " of block " + std::to_string(block) +
                                       " is not held in NF4");
}

template <class T>
void Nf4DeviceWeights<T>::forward(int block, Projection p, T* out, const T* inp, const T* bias,
                                  size_t N) {
  kc::nf4_linear_forward(out, inp, quantized_weight(block, p), int64_t(N), stream_, bias);
}

template <class T>
void Nf4DeviceWeights<T>::backward_input(int block, Projection p, T* dinp, const T* dout,
                                         size_t N) {
  kc::nf4_linear_backward_input(dinp, dout, quantized_weight(block, p), int64_t(N),
                                /*accumulate=*/false, stream_);
}

template class Nf4DeviceWeights<float>;
template class Nf4DeviceWeights<__nv_bfloat16>;
template class Nf4DeviceWeights<__half>;

}  // namespace dsx::models
