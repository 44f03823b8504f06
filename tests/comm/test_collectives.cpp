// Every collective of the ofi backend, on real processes over loopback: each op x dtype x world
// size 1-4 x sizes that divide neither by the world size nor by the chunk, compared bit for bit
// with a serial reference. Inputs are small integers, so every order of summation gives the
// same exact answer and a single wrong or misplaced element shows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/dtype.h"
#include "tests/comm/comm_harness.h"

namespace dsx::comm {
namespace {

using test::run_job;
using test::test_options;

// The value rank `rank` contributes at element i: an integer in [-8, 8].
float input_value(int rank, size_t i) { return static_cast<float>(static_cast<int>((rank * 7 + i * 13) % 17) - 8); }

// Round a float to `dtype` and back: what a buffer of that type holds.
float as_dtype(DType dtype, float x) {
  switch (dtype) {
    case DType::F16: return kernels::fp16_to_float(kernels::float_to_fp16(x));
    case DType::BF16: return kernels::bf16_to_float(kernels::float_to_bf16(x));
    default: return x;
  }
}

struct Buffer {
  Buffer(DType t, size_t n) : dtype(t), bytes(n * kernels::dtype_size(t), 0) {}
  void* data() { return bytes.data(); }
  float get(size_t i) const {
    if (dtype == DType::F32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return dtype == DType::F16 ? kernels::fp16_to_float(h) : kernels::bf16_to_float(h);
  }
  void set(size_t i, float f) {
    if (dtype == DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      return;
    }
    uint16_t h = dtype == DType::F16 ? kernels::float_to_fp16(f) : kernels::float_to_bf16(f);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  DType dtype;
  std::vector<char> bytes;
};

// Serial reference of element i over p ranks, computed in double and rounded once.
float reference(ReduceOp op, DType dtype, int p, size_t i) {
  double acc = input_value(0, i);
  for (int r = 1; r < p; ++r) {
    double v = input_value(r, i);
    acc = op == ReduceOp::Max ? std::max(acc, v) : op == ReduceOp::Min ? std::min(acc, v) : acc + v;
  }
  if (op == ReduceOp::Avg) return as_dtype(dtype, static_cast<float>(acc) * (1.0f / static_cast<float>(p)));
  return as_dtype(dtype, static_cast<float>(acc));
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

std::string where(const char* op, DType dtype, size_t count, size_t i, float got, float want) {
  return std::string(op) + " " + kernels::dtype_name(dtype) + " count " + std::to_string(count) + ": element " +
         std::to_string(i) + " is " + std::to_string(got) + ", expected " + std::to_string(want);
}

void run_everything(Communicator& comm, int rank) {
  const int p = comm.size();
  const size_t counts[] = {1, 7, 300, 2053};
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (size_t count : counts) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
        Buffer buf(dtype, count);
        for (size_t i = 0; i < count; ++i) buf.set(i, input_value(rank, i));
        comm.allreduce(buf.data(), count, dtype, op)->wait();
        for (size_t i = 0; i < count; ++i) {
          float want = reference(op, dtype, p, i);
          expect(buf.get(i) == want, where("allreduce", dtype, count, i, buf.get(i), want));
        }

        // reduce_scatter: out of place and in place.
        Buffer in(dtype, count * static_cast<size_t>(p)), out(dtype, count);
        for (size_t i = 0; i < in.bytes.size() / kernels::dtype_size(dtype); ++i) in.set(i, input_value(rank, i));
        Buffer in_place = in;
        comm.reduce_scatter(in.data(), out.data(), count, dtype, op)->wait();
        void* mine = in_place.bytes.data() + static_cast<size_t>(rank) * count * kernels::dtype_size(dtype);
        comm.reduce_scatter(in_place.data(), mine, count, dtype, op)->wait();
        for (size_t i = 0; i < count; ++i) {
          float want = reference(op, dtype, p, static_cast<size_t>(rank) * count + i);
          expect(out.get(i) == want, where("reduce_scatter", dtype, count, i, out.get(i), want));
          float got = in_place.get(static_cast<size_t>(rank) * count + i);
          expect(got == want, where("reduce_scatter in place", dtype, count, i, got, want));
        }
      }

      // allgather: out of place and in place.
      Buffer mine(dtype, count), all(dtype, count * static_cast<size_t>(p)), all_in_place(dtype, count * static_cast<size_t>(p));
      for (size_t i = 0; i < count; ++i) {
        mine.set(i, input_value(rank, i));
        all_in_place.set(static_cast<size_t>(rank) * count + i, input_value(rank, i));
      }
      comm.allgather(mine.data(), all.data(), count, dtype)->wait();
      void* slot = all_in_place.bytes.data() + static_cast<size_t>(rank) * count * kernels::dtype_size(dtype);
      comm.allgather(slot, all_in_place.data(), count, dtype)->wait();
      for (int r = 0; r < p; ++r) {
        for (size_t i = 0; i < count; ++i) {
          size_t at = static_cast<size_t>(r) * count + i;
          expect(all.get(at) == input_value(r, i), where("allgather", dtype, count, at, all.get(at), input_value(r, i)));
          expect(all_in_place.get(at) == input_value(r, i),
                 where("allgather in place", dtype, count, at, all_in_place.get(at), input_value(r, i)));
        }
      }

      // broadcast from the last rank (the chain wraps around).
      int root = p - 1;
      Buffer b(dtype, count);
      for (size_t i = 0; i < count; ++i) b.set(i, rank == root ? input_value(root, i) : 99.0f);
      comm.broadcast(b.data(), count, dtype, root)->wait();
      for (size_t i = 0; i < count; ++i) {
        expect(b.get(i) == input_value(root, i), where("broadcast", dtype, count, i, b.get(i), input_value(root, i)));
      }
    }
  }
  comm.barrier()->wait();
}

class EveryCollective : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(EveryCollective, MatchesTheSerialReferenceExactly) {
  auto [provider, world] = GetParam();
  auto result = run_job(world, test_options(provider), run_everything);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

INSTANTIATE_TEST_SUITE_P(Loopback, EveryCollective,
                         ::testing::Combine(::testing::Values("shm", "tcp"), ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_world" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace dsx::comm
