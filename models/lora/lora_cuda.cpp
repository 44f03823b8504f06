// LoraAdaptersCuda (see lora_cuda.h): LoraAdapters' branches on the GPU.
#include "models/lora/lora_cuda.h"

#include <algorithm>

#include "kernels/cuda/lora_linear.h"

namespace dsx::models {

namespace kc = dsx::kernels::cuda;

template <class T>
LoraAdaptersCuda<T>::LoraAdaptersCuda(const LoraAdapters& layout, device::Device& gpu,
                                      cudaStream_t stream, int max_batch, int max_seq)
    : layout_(layout),
      stream_(stream),
      blas_workspace_(decoder_blas_workspace(gpu, 0)),
      blas_(workspace_of(blas_workspace_)) {
  using Kind = device::OwnedMemory::Kind;
  const size_t N = static_cast<size_t>(max_batch) * max_seq, r = layout.config().r;
  int widest = 0;
  for (int b = 0; b < layout.num_blocks(); ++b)
    for (int p = 0; p < kNumProjections; ++p)
      if (const auto* s = layout.site(b, Projection(p))) widest = std::max(widest, s->in);
  for (size_t i = 0; i < layout.specs().size() / 2; ++i)
    u_.emplace_back(gpu, Kind::Device, N * r * sizeof(T));
  du_ = device::OwnedMemory(gpu, Kind::Device, N * r * sizeof(T));
  if (layout.config().dropout > 0) {
    xdrop_ = device::OwnedMemory(gpu, Kind::Device, N * widest * sizeof(T));
    dx_ = device::OwnedMemory(gpu, Kind::Device, N * widest * sizeof(T));
  }
}

template <class T>
size_t LoraAdaptersCuda<T>::activation_bytes() const {
  size_t bytes = du_.bytes() + xdrop_.bytes() + dx_.bytes();
  for (const auto& u : u_) bytes += u.bytes();
  return bytes;
}

template <class T>
void LoraAdaptersCuda<T>::bind(ParamAccess* access, GradSink* sink, bool training) {
  access_ = access, sink_ = sink;
  if (sink == nullptr) {  // a forward: a training one draws a new dropout mask
    dropout_on_ = training && layout_.config().dropout > 0;
    if (training) ++forward_count_;
  }
}

template <class T>
const T* LoraAdaptersCuda<T>::dropped(int block, Projection p, const T* inp, size_t N, int in) {
  if (!dropout_on_) return inp;
  const auto mask = kernels::lora::dropout_mask(forward_count_, block, static_cast<int>(p),
                                                layout_.config().dropout);
  kc::lora_dropout_forward(xdrop_.as<T>(), inp, N * static_cast<size_t>(in), mask, stream_);
  return xdrop_.as<T>();
}

template <class T>
void LoraAdaptersCuda<T>::forward(int block, Projection p, T* out, const T* inp, size_t N) {
  const LoraAdapters::Site* s = layout_.site(block, p);
  if (!s) return;
  const auto* A = static_cast<const T*>(access_->param(s->a_index));
  const auto* B = static_cast<const T*>(access_->param(s->a_index + 1));
  const T* x = dropped(block, p, inp, N, s->in);
  kc::lora_linear_forward(blas_, out, u_of(*s), x, A, B, N, s->in, layout_.config().r, s->out,
                          layout_.scale(), stream_);
}

// With dropout the input gradient goes through the mask: dinp += dx' / keep where kept.
template <class T>
void LoraAdaptersCuda<T>::backward(int block, Projection p, T* dinp, const T* dout, const T* inp,
                                   size_t N) {
  const LoraAdapters::Site* s = layout_.site(block, p);
  if (!s) return;
  const auto* A = static_cast<const T*>(access_->param(s->a_index));
  const auto* B = static_cast<const T*>(access_->param(s->a_index + 1));
  auto* dA = static_cast<T*>(sink_->grad(s->a_index));
  auto* dB = static_cast<T*>(sink_->grad(s->a_index + 1));
  const int r = layout_.config().r;
  const T* x = dropped(block, p, inp, N, s->in);
  if (!dropout_on_) {
    kc::lora_linear_backward(blas_, dinp, dA, dB, du_.as<T>(), dout, x, u_of(*s), A, B, N, s->in, r,
                             s->out, layout_.scale(), stream_);
    return;
  }
  kc::lora_linear_backward(blas_, dx_.as<T>(), dA, dB, du_.as<T>(), dout, x, u_of(*s), A, B, N,
                           s->in, r, s->out, layout_.scale(), stream_, /*dx_accumulates=*/false);
  const auto mask = kernels::lora::dropout_mask(forward_count_, block, static_cast<int>(p),
                                                layout_.config().dropout);
  kc::lora_dropout_backward(dinp, dx_.as<T>(), N * static_cast<size_t>(s->in), mask, stream_);
}

template class LoraAdaptersCuda<float>;
template class LoraAdaptersCuda<__nv_bfloat16>;
template class LoraAdaptersCuda<__half>;

}  // namespace dsx::models
