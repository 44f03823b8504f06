// The shared-memory path of the ofi backend (comm/ofi/host_segments.h): over shm, allreduce,
// reduce-scatter and allgather run through segments the ranks map from each other. These tests
// check that it is really taken, that it gives exact results (many rounds per operation, slots
// reused, many operations of every kind in flight, sub-groups beside the world), that buffers in
// shared host memory are read in place (and only when every rank's is), and that every rank
// falls back to the fabric together when one rank switches it off or the host forbids mapping
// another process's memory.
#include <gtest/gtest.h>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "comm/host_memory.h"
#include "comm/ofi/ofi_communicator.h"
#include "kernels/dtype.h"
#include "tests/comm/comm_harness.h"

namespace dsx::comm {
namespace {

using test::run_job;
using test::run_job_with;
using test::test_options;
using namespace std::chrono_literals;

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

bool takes_shared_path(Communicator& comm) {
  auto* ofi = dynamic_cast<ofi::OfiCommunicator*>(&comm);
  expect(ofi != nullptr, "not an ofi communicator: " + comm.backend());
  return ofi->uses_shared_memory();
}

// Rank r's input at element i: a small integer, so every summation order is exact in every dtype.
float input(int rank, size_t i) { return static_cast<float>(static_cast<int>((rank * 5 + i * 11) % 13) - 6); }

std::vector<int> all_ranks(int p) {
  std::vector<int> ranks(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) ranks[static_cast<size_t>(q)] = q;
  return ranks;
}

struct Case {
  DType dtype;
  ReduceOp op;
  size_t count;
};

// Element i of the answer over `ranks` (world ranks whose inputs are reduced), as `dtype` holds it.
float answer(const Case& c, const std::vector<int>& ranks, size_t i) {
  double acc = input(ranks[0], i);
  for (size_t k = 1; k < ranks.size(); ++k) {
    double v = input(ranks[k], i);
    acc = c.op == ReduceOp::Max ? std::max(acc, v) : c.op == ReduceOp::Min ? std::min(acc, v) : acc + v;
  }
  float f = static_cast<float>(acc);
  if (c.op == ReduceOp::Avg) f *= 1.0f / static_cast<float>(ranks.size());
  if (c.dtype == DType::F16) return kernels::fp16_to_float(kernels::float_to_fp16(f));
  if (c.dtype == DType::BF16) return kernels::bf16_to_float(kernels::float_to_bf16(f));
  return f;
}

// Where a test buffer lives: ordinary memory, or shared host memory that peers read in place.
enum class Memory { Ordinary, Shared };

struct Buffer {
  Buffer(const Case& c, int rank, Memory memory) : c(c) {
    const size_t n = c.count * kernels::dtype_size(c.dtype);
    if (memory == Memory::Shared) {
      shared.resize(n);
    } else {
      ordinary.resize(n);
    }
    for (size_t i = 0; i < c.count; ++i) set(i, input(rank, i));
  }
  char* data() { return shared.empty() ? ordinary.data() : shared.data(); }
  const char* data() const { return shared.empty() ? ordinary.data() : shared.data(); }
  void set(size_t i, float f) {
    if (c.dtype == DType::F32) {
      std::memcpy(data() + 4 * i, &f, 4);
      return;
    }
    uint16_t h = c.dtype == DType::F16 ? kernels::float_to_fp16(f) : kernels::float_to_bf16(f);
    std::memcpy(data() + 2 * i, &h, 2);
  }
  float get(size_t i) const {
    if (c.dtype == DType::F32) {
      float f;
      std::memcpy(&f, data() + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, data() + 2 * i, 2);
    return c.dtype == DType::F16 ? kernels::fp16_to_float(h) : kernels::bf16_to_float(h);
  }
  Case c;
  std::vector<char> ordinary;
  std::vector<char, SharedHostAllocator<char>> shared;
};

const std::vector<Case> kCases = {
    {DType::F32, ReduceOp::Sum, 1},      {DType::F32, ReduceOp::Sum, 2},     {DType::F16, ReduceOp::Avg, 5},
    {DType::BF16, ReduceOp::Max, 1001},  {DType::F32, ReduceOp::Min, 4099},  {DType::F32, ReduceOp::Sum, 70001},
    {DType::BF16, ReduceOp::Sum, 33333}, {DType::F16, ReduceOp::Avg, 20000},
};

// Issues every case at once on `comm` (world ranks `ranks`), then checks them all.
void allreduce_every_case(Communicator& comm, int world_rank, const std::vector<int>& ranks,
                          Memory memory = Memory::Ordinary) {
  std::vector<Buffer> buffers;
  std::vector<WorkHandle> works;
  for (const Case& c : kCases) buffers.emplace_back(c, world_rank, memory);
  for (Buffer& b : buffers) works.push_back(comm.allreduce(b.data(), b.c.count, b.c.dtype, b.c.op));
  for (auto& w : works) w->wait(30s);
  for (const Buffer& b : buffers) {
    for (size_t i = 0; i < b.c.count; ++i) {
      float want = answer(b.c, ranks, i);
      expect(b.get(i) == want, std::string(kernels::dtype_name(b.c.dtype)) + " " + kernels::reduce_op_name(b.c.op) +
                                   " count " + std::to_string(b.c.count) + ": element " + std::to_string(i) + " is " +
                                   std::to_string(b.get(i)) + ", expected " + std::to_string(want));
    }
  }
}

TEST(SharedMemory, AllreduceTakesTheSharedPathAndIsExact) {
  auto body = [](Communicator& world, int rank) {
    expect(takes_shared_path(world), "rank " + std::to_string(rank) + " kept to the fabric over shm");
    allreduce_every_case(world, rank, {0, 1, 2});
    // A sub-group has segments of its own; the world's keep working beside it.
    if (rank != 1) {
      auto pair = world.new_group({2, 0});
      expect(takes_shared_path(*pair), "the sub-group kept to the fabric");
      allreduce_every_case(*pair, rank, {2, 0});
    }
    allreduce_every_case(world, rank, {0, 1, 2});
  };
  auto result = run_job(3, test_options("shm"), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// Allreduce, reduce-scatter and allgather share the segments' rounds: issue them interleaved,
// all in flight at once, and check every result.
TEST(SharedMemory, MixedCollectivesInFlightShareTheRounds) {
  auto body = [](Communicator& world, int rank) {
    const int p = world.size();
    const size_t n = 50'001;  // per rank: many rounds of 256 bytes, not a multiple of anything
    std::vector<std::vector<float>> sums, scattered_in, scattered_out, gathered;
    std::vector<WorkHandle> works;
    for (int k = 0; k < 6; ++k) {
      sums.emplace_back(n);
      scattered_in.emplace_back(n * static_cast<size_t>(p));
      scattered_out.emplace_back(n);
      gathered.emplace_back(n * static_cast<size_t>(p));
    }
    for (size_t k = 0; k < 6; ++k) {
      for (size_t i = 0; i < n; ++i) sums[k][i] = input(rank, i + k);
      for (size_t i = 0; i < n * static_cast<size_t>(p); ++i) scattered_in[k][i] = input(rank, i + k);
      works.push_back(world.allreduce(sums[k].data(), n, DType::F32, ReduceOp::Sum));
      works.push_back(world.reduce_scatter(scattered_in[k].data(), scattered_out[k].data(), n, DType::F32, ReduceOp::Max));
      works.push_back(world.allgather(sums[k].data(), gathered[k].data(), n, DType::F32));  // the sum, once done
    }
    for (auto& w : works) w->wait(30s);
    const Case sum{DType::F32, ReduceOp::Sum, n}, max{DType::F32, ReduceOp::Max, n};
    std::vector<int> all(static_cast<size_t>(p));
    for (int q = 0; q < p; ++q) all[static_cast<size_t>(q)] = q;
    for (size_t k = 0; k < 6; ++k) {
      for (size_t i = 0; i < n; ++i) {
        float want = answer(sum, all, i + k);
        expect(sums[k][i] == want, "allreduce " + std::to_string(k) + " element " + std::to_string(i));
        size_t at = static_cast<size_t>(rank) * n + i;
        expect(scattered_out[k][i] == answer(max, all, at + k), "reduce_scatter " + std::to_string(k) + " element " + std::to_string(i));
        for (int q = 0; q < p; ++q) {
          expect(gathered[k][static_cast<size_t>(q) * n + i] == want, "allgather " + std::to_string(k) + " element " + std::to_string(i));
        }
      }
    }
  };
  auto result = run_job(3, test_options("shm"), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// With a in-place threshold of 256 bytes, five of kCases' allreduces (those above 256 bytes)
// read the ranks' shared buffers in place; the three smallest take the one-step path.
constexpr uint64_t kInPlaceCases = 5;

CommOptions in_place_options() {
  auto options = test_options("shm");
  options.shared_memory_in_place_bytes = 256;
  return options;
}

uint64_t in_place_operations(Communicator& comm) {
  return dynamic_cast<ofi::OfiCommunicator&>(comm).in_place_operations();
}

TEST(SharedMemory, SharedBuffersAreReadInPlaceAndExact) {
  for (int world_size : {2, 3, 4}) {
    auto body = [](Communicator& world, int rank) {
      allreduce_every_case(world, rank, all_ranks(world.size()), Memory::Shared);
      expect(in_place_operations(world) == kInPlaceCases,
             std::to_string(in_place_operations(world)) + " allreduces read the buffers in place");
      // A sub-group maps the same buffers through its own segments.
      if (rank < 2) {
        auto pair = world.new_group({1, 0});
        allreduce_every_case(*pair, rank, {1, 0}, Memory::Shared);
        expect(in_place_operations(*pair) == kInPlaceCases, "the sub-group copied through its slots");
      }
      allreduce_every_case(world, rank, all_ranks(world.size()), Memory::Ordinary);
      expect(in_place_operations(world) == kInPlaceCases, "ordinary memory cannot be read in place");
    };
    auto result = run_job(world_size, in_place_options(), body);
    EXPECT_TRUE(result.all_ok()) << world_size << " ranks: " << result.summary();
  }
}

// Reduce-scatter and allgather read their peers' inputs in place, out of place and in place.
TEST(SharedMemory, SharedInputsOfReduceScatterAndAllgatherAreReadInPlace) {
  for (int world_size : {2, 3}) {
    auto body = [](Communicator& world, int rank) {
      const int p = world.size();
      const size_t p_size = static_cast<size_t>(p), r = static_cast<size_t>(rank);
      const std::vector<int> all = all_ranks(p);
      const Case cases[] = {{DType::F32, ReduceOp::Sum, 10007}, {DType::BF16, ReduceOp::Avg, 3001},
                            {DType::F16, ReduceOp::Max, 777}};
      for (const Case& c : cases) {
        const Case whole{c.dtype, c.op, c.count * p_size};
        for (bool in_place : {false, true}) {
          Buffer in(whole, rank, Memory::Shared);
          Buffer out(c, rank, Memory::Ordinary);
          const size_t esize = kernels::dtype_size(c.dtype);
          char* to = in_place ? in.data() + r * c.count * esize : out.data();
          world.reduce_scatter(in.data(), to, c.count, c.dtype, c.op)->wait(30s);
          for (size_t i = 0; i < c.count; ++i) {
            Buffer& result = in_place ? in : out;
            float got = result.get(in_place ? r * c.count + i : i);
            expect(got == answer(c, all, r * c.count + i), "reduce_scatter element " + std::to_string(i));
          }
          // allgather: every rank's block of `whole` as its input; all blocks come back.
          Buffer gathered(whole, 0, Memory::Shared);
          Buffer mine(c, 0, Memory::Shared);
          for (size_t i = 0; i < whole.count; ++i) gathered.set(i, -100.0f);  // no input is -100
          for (size_t i = 0; i < c.count; ++i) {
            (in_place ? gathered : mine).set(in_place ? r * c.count + i : i, input(rank, r * c.count + i));
          }
          const char* from = in_place ? gathered.data() + r * c.count * esize : mine.data();
          world.allgather(from, gathered.data(), c.count, c.dtype)->wait(30s);
          for (size_t i = 0; i < whole.count; ++i) {
            const int q = static_cast<int>(i / c.count);
            Case one{c.dtype, ReduceOp::Max, 1};
            expect(gathered.get(i) == answer(one, {q}, i), "allgather element " + std::to_string(i));
          }
        }
      }
      const uint64_t read_in_place = in_place_operations(world);
      expect(read_in_place == 12, std::to_string(read_in_place) + " operations in place, not 12");
    };
    auto result = run_job(world_size, in_place_options(), body);
    EXPECT_TRUE(result.all_ok()) << world_size << " ranks: " << result.summary();
  }
}

TEST(SharedMemory, OneRankWithOrdinaryMemoryKeepsEveryRankOnTheSlots) {
  auto body = [](Communicator& world, int rank) {
    allreduce_every_case(world, rank, {0, 1, 2}, rank == 1 ? Memory::Ordinary : Memory::Shared);
    expect(in_place_operations(world) == 0, "rank " + std::to_string(rank) + " read in place without rank 1");
  };
  auto result = run_job(3, in_place_options(), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// DSX_COMM_IN_PLACE=0 (read by comm_options_from_environment, as dsx train and bench do) keeps
// shared buffers on the slots; the results stay exact.
TEST(SharedMemory, InPlaceSwitchedOffByTheEnvironment) {
  auto options_of = [](int) { return comm_options_from_environment(in_place_options()); };
  auto body = [](Communicator& world, int rank) {
    allreduce_every_case(world, rank, {0, 1}, Memory::Shared);
    expect(in_place_operations(world) == 0, "read in place with DSX_COMM_IN_PLACE=0");
  };
  auto result = run_job_with(2, options_of, body, 60s, [](int) { setenv("DSX_COMM_IN_PLACE", "0", 1); });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// Buffers come and go (more of them than a rank keeps mapped): each is mapped afresh, never
// confused with a freed one.
TEST(SharedMemory, FreedSharedBuffersAreNeverReadAgain) {
  auto body = [](Communicator& world, int rank) {
    const int kBuffers = 20;
    for (int k = 0; k < kBuffers; ++k) {
      const size_t n = 3000 + 997 * static_cast<size_t>(k % 7);
      std::vector<float, SharedHostAllocator<float>> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = input(rank, i + static_cast<size_t>(k));
      world.allreduce(x.data(), n, DType::F32, ReduceOp::Sum)->wait(30s);
      const Case sum{DType::F32, ReduceOp::Sum, n};
      for (size_t i = 0; i < n; ++i) {
        expect(x[i] == answer(sum, {0, 1}, i + static_cast<size_t>(k)),
               "buffer " + std::to_string(k) + " element " + std::to_string(i));
      }
    }
    expect(in_place_operations(world) == static_cast<uint64_t>(kBuffers),
           "some buffers were copied through the slots");
  };
  auto result = run_job(2, in_place_options(), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(SharedMemory, OneRankSwitchedOffKeepsEveryRankOnTheFabric) {
  auto options_of = [](int rank) {
    auto options = test_options("shm");
    options.shared_memory = rank != 1;  // as DSX_COMM_SHARED_MEMORY=0 on rank 1 only
    return options;
  };
  auto body = [](Communicator& world, int rank) {
    expect(!takes_shared_path(world), "rank " + std::to_string(rank) + " took the shared path alone");
    allreduce_every_case(world, rank, {0, 1, 2});
  };
  auto result = run_job_with(3, options_of, body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// What a hardened host does (a container without CAP_SYS_PTRACE, processes that are not
// dumpable): /proc/<pid>/fd of another rank cannot be opened. Every rank must notice, agree and
// fall back, and the fabric must still give exact results.
void forbid_access_to_this_process() {
  prctl(PR_SET_DUMPABLE, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) == 0) {
    data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    data[CAP_TO_INDEX(CAP_SYS_PTRACE)].permitted &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    syscall(SYS_capset, &header, data);
  }
}

TEST(SharedMemory, HostThatForbidsMappingFallsBackToTheFabric) {
  auto body = [](Communicator& world, int rank) {
    expect(!takes_shared_path(world), "rank " + std::to_string(rank) + " mapped a peer it may not trace");
    allreduce_every_case(world, rank, {0, 1});
  };
  auto result = run_job(2, test_options("shm"), body, 60s, [](int) { forbid_access_to_this_process(); });
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

}  // namespace
}  // namespace dsx::comm
