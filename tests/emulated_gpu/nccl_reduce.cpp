#include "tests/emulated_gpu/nccl_reduce.h"

#include <cstdint>

#include "kernels/dtype.h"

namespace dsx::emu::nccl {
namespace {

// How one element type is read into its accumulator and written back.
template <class T, class A = T>
struct Plain {
  using Acc = A;
  static A load(const void* p, size_t i) { return A(static_cast<const T*>(p)[i]); }
  static void store(void* p, size_t i, A v) { static_cast<T*>(p)[i] = T(v); }
};
struct Half {
  using Acc = float;
  static float load(const void* p, size_t i) {
    return kernels::fp16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  static void store(void* p, size_t i, float v) {
    static_cast<uint16_t*>(p)[i] = kernels::float_to_fp16(v);
  }
};
struct Bf16 {
  using Acc = float;
  static float load(const void* p, size_t i) {
    return kernels::bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  static void store(void* p, size_t i, float v) {
    static_cast<uint16_t*>(p)[i] = kernels::float_to_bf16(v);
  }
};

template <class E, ncclRedOp_t Op>
void reduce_as(const void* const* in, int n, void* out, size_t count) {
  using A = typename E::Acc;
  for (size_t i = 0; i < count; ++i) {
    A acc = E::load(in[0], i);
    for (int r = 1; r < n; ++r) {
      const A v = E::load(in[r], i);
      if constexpr (Op == ncclSum || Op == ncclAvg)
        acc = A(acc + v);
      else if constexpr (Op == ncclProd)
        acc = A(acc * v);
      else if constexpr (Op == ncclMax)
        acc = v > acc ? v : acc;
      else
        acc = v < acc ? v : acc;
    }
    if constexpr (Op == ncclAvg) acc = A(acc / A(n));
    E::store(out, i, acc);
  }
}

template <class E>
void reduce_type(ncclRedOp_t op, const void* const* in, int n, void* out, size_t count) {
  switch (op) {
    case ncclSum:
      return reduce_as<E, ncclSum>(in, n, out, count);
    case ncclProd:
      return reduce_as<E, ncclProd>(in, n, out, count);
    case ncclMax:
      return reduce_as<E, ncclMax>(in, n, out, count);
    case ncclMin:
      return reduce_as<E, ncclMin>(in, n, out, count);
    case ncclAvg:
      return reduce_as<E, ncclAvg>(in, n, out, count);
    default:
      return;
  }
}

}  // namespace

size_t element_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "an unknown ncclDataType_t";
  }
}

const char* op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "ncclSum";
    case ncclProd:
      return "ncclProd";
    case ncclMax:
      return "ncclMax";
    case ncclMin:
      return "ncclMin";
    case ncclAvg:
      return "ncclAvg";
    default:
      return "a custom ncclRedOp_t";
  }
}

bool known_op(ncclRedOp_t op) { return op >= ncclSum && op <= ncclAvg; }

void reduce(ncclDataType_t type, ncclRedOp_t op, const void* const* in, int n, void* out,
            size_t count) {
  switch (type) {
    case ncclInt8:
      return reduce_type<Plain<int8_t>>(op, in, n, out, count);
    case ncclUint8:
      return reduce_type<Plain<uint8_t>>(op, in, n, out, count);
    case ncclInt32:
      return reduce_type<Plain<int32_t>>(op, in, n, out, count);
    case ncclUint32:
      return reduce_type<Plain<uint32_t>>(op, in, n, out, count);
    case ncclInt64:
      return reduce_type<Plain<int64_t>>(op, in, n, out, count);
    case ncclUint64:
      return reduce_type<Plain<uint64_t>>(op, in, n, out, count);
    case ncclFloat16:
      return reduce_type<Half>(op, in, n, out, count);
    case ncclFloat32:
      return reduce_type<Plain<float>>(op, in, n, out, count);
    case ncclFloat64:
      return reduce_type<Plain<double>>(op, in, n, out, count);
    case ncclBfloat16:
      return reduce_type<Bf16>(op, in, n, out, count);
    default:
      return;
  }
}

}  // namespace dsx::emu::nccl
