// NF4 state as bytes (see nf4_state_bytes.h).
#include "models/lora/nf4_state_bytes.h"

#include <cstring>
#include <vector>

namespace dsx::models {

namespace {

namespace k = dsx::kernels;

size_t absmax_count(const k::Nf4Tensor& t) { return static_cast<size_t>(t.blocks()); }
size_t nested_count(const k::Nf4Tensor& t) {
  return static_cast<size_t>(k::nf4_blocks(t.blocks(), t.nested->blocksize));
}

template <class T>
const uint8_t* take(std::vector<T>& into, size_t count, const uint8_t* in) {
  into.resize(count);
  std::memcpy(into.data(), in, count * sizeof(T));
  return in + count * sizeof(T);
}

template <class T>
uint8_t* put(uint8_t* out, const std::vector<T>& from) {
  std::memcpy(out, from.data(), from.size() * sizeof(T));
  return out + from.size() * sizeof(T);
}

}  // namespace

size_t nf4_state_bytes(const k::Nf4Tensor& t) {
  const size_t packed = static_cast<size_t>(k::nf4_packed_bytes(t.numel()));
  if (!t.nested) return packed + absmax_count(t) * sizeof(float);
  return packed + absmax_count(t) + nested_count(t) * sizeof(float);
}

void nf4_write_state(uint8_t* out, const k::Nf4Tensor& t) {
  out = put(out, t.packed);
  if (!t.nested) {
    put(out, t.absmax);
    return;
  }
  out = put(out, t.nested->codes);
  put(out, t.nested->absmax);
}

void nf4_read_state(k::Nf4Tensor& t, const uint8_t* in) {
  in = take(t.packed, static_cast<size_t>(k::nf4_packed_bytes(t.numel())), in);
  if (!t.nested) {
    take(t.absmax, absmax_count(t), in);
    return;
  }
  in = take(t.nested->codes, absmax_count(t), in);
  take(t.nested->absmax, nested_count(t), in);
}

void nf4_drop_state(k::Nf4Tensor& t) {
  std::vector<uint8_t>().swap(t.packed);
  std::vector<float>().swap(t.absmax);
  if (t.nested) {
    std::vector<uint8_t>().swap(t.nested->codes);
    std::vector<float>().swap(t.nested->absmax);
  }
}

k::Nf4Tensor nf4_settings_of(const k::Nf4Tensor& t) {
  k::Nf4Tensor s;
  s.rows = t.rows, s.cols = t.cols, s.blocksize = t.blocksize, s.compute = t.compute;
  if (t.nested) {
    k::Nf4NestedAbsmax n;
    n.code = t.nested->code, n.offset = t.nested->offset, n.blocksize = t.nested->blocksize;
    s.nested = std::move(n);
  }
  return s;
}

}  // namespace dsx::models
