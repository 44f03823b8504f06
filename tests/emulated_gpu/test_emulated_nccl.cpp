// The emulated NCCL against what real NCCL does, with real rank processes: the test forks 2 or 3
// ranks, each on its own emulated GPU (DSX_EMULATED_GPUS=4), which share one unique id. A rank
// reports a failure through a shared board and its exit code; the test always reaps them.
#include <dirent.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/dtype.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kMaxRanks = 4;

// Shared by the test and its rank processes (a MAP_SHARED page made before the fork).
struct Board {
  std::atomic<int> met[8];
  std::atomic<uint64_t> hash[kMaxRanks];
  char failure[kMaxRanks][1024];
};

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw Failure(what);
}
void nccl_ok(ncclResult_t r, const std::string& what) {
  require(r == ncclSuccess,
          what + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) + ")");
}
void cuda_ok(cudaError_t e, const std::string& what) {
  require(e == cudaSuccess, what + ": " + cudaGetErrorString(e));
}

// Every rank waits here until all `n` reached point `point`.
void meet(Board& b, int n, int point) {
  b.met[point].fetch_add(1);
  const auto limit = Clock::now() + 60s;
  while (b.met[point].load() < n) {
    require(Clock::now() < limit, "the other ranks never reached point " + std::to_string(point));
    std::this_thread::sleep_for(1ms);
  }
}

struct Rank {
  int rank, n;
  const ncclUniqueId& id;
  Board& board;
};
using Body = std::function<void(Rank&)>;

std::vector<std::string> leftovers() {
  std::vector<std::string> out;
  const std::string prefix = "dsx-nccl-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

// Runs `body` in `n` forked rank processes; "" when every rank passed, else what failed.
std::string run_ranks(int n, const Body& body, std::chrono::seconds limit = 90s,
                      const char* nccl_timeout = "30") {
  setenv("DSX_EMULATED_GPUS", "4", 1);
  setenv("DSX_EMULATED_NCCL_TIMEOUT_SECONDS", nccl_timeout, 1);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return "ncclGetUniqueId failed";
  auto* board = static_cast<Board*>(
      mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        Rank me{r, n, id, *board};
        body(me);
      } catch (const std::exception& e) {
        std::snprintf(board->failure[r], sizeof board->failure[r], "%s", e.what());
        code = 1;
      }
      _exit(code);  // no gtest teardown in a rank
    }
    pids.push_back(pid);
  }
  std::string result;
  const auto deadline = Clock::now() + limit;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    while (waitpid(pids[size_t(r)], &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        for (pid_t p : pids) kill(p, SIGKILL);
        waitpid(pids[size_t(r)], &status, 0);
        result += "rank " + std::to_string(r) + " did not finish in time; ";
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      result += "rank " + std::to_string(r) + ": " + board->failure[r] + "; ";
    else if (WIFSIGNALED(status))
      result += "rank " + std::to_string(r) + " died of signal " +
                std::to_string(WTERMSIG(status)) + "; ";
  }
  munmap(board, sizeof(Board));
  for (const std::string& f : leftovers()) result += "left in /dev/shm: " + f + "; ";
  return result;
}

ncclComm_t join(Rank& me, int device = -1) {
  cuda_ok(cudaSetDevice(device < 0 ? me.rank : device), "cudaSetDevice");
  ncclComm_t comm = nullptr;
  nccl_ok(ncclCommInitRank(&comm, me.n, me.id, me.rank), "ncclCommInitRank");
  return comm;
}

// A device buffer with host copies in and out.
template <class T>
struct Buffer {
  size_t count;
  T* device = nullptr;
  explicit Buffer(size_t n) : count(n) {
    cuda_ok(cudaMalloc(&device, n * sizeof(T)), "cudaMalloc");
  }
  ~Buffer() { cudaFree(device); }
  void put(const std::vector<T>& host) {
    cuda_ok(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            "copy in");
  }
  std::vector<T> get() {
    std::vector<T> host(count);
    cuda_ok(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "copy out");
    return host;
  }
};

// Rank r's element i: a multiple of 1/256 in [-4, 4], exact in fp32.
float value(int rank, size_t i) {
  return float(long((i * 7919 + size_t(rank) * 104729) % 2001) - 1000) / 256.0f;
}

uint64_t hash_bytes(const void* p, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

bool close_to(double got, double want, double relative) {
  return std::fabs(got - want) <= relative * std::fabs(want) + 1e-6;
}

// Allreduce of fp32 and bf16 with sum, avg and max against a float64 reference; every rank's
// results hashed onto the board, so the test can check they are bit-identical.
void allreduces(Rank& me) {
  ncclComm_t comm = join(me);
  cudaStream_t stream;
  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  const size_t count = 1001;
  uint64_t hash = 0;
  for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclMax}) {
    std::vector<double> want(count);
    std::vector<float> mine(count);
    std::vector<uint16_t> mine_bf16(count);
    for (size_t i = 0; i < count; ++i) {
      double sum = 0, max = -1e30;
      for (int r = 0; r < me.n; ++r) {
        const double v = dsx::kernels::bf16_to_float(dsx::kernels::float_to_bf16(value(r, i)));
        sum += v, max = std::max(max, v);
      }
      want[i] = op == ncclSum ? sum : op == ncclAvg ? sum / me.n : max;
      mine[i] = dsx::kernels::bf16_to_float(dsx::kernels::float_to_bf16(value(me.rank, i)));
      mine_bf16[i] = dsx::kernels::float_to_bf16(value(me.rank, i));
    }
    Buffer<float> in(count), out(count);
    in.put(mine);
    nccl_ok(ncclAllReduce(in.device, out.device, count, ncclFloat32, op, comm, stream),
            "ncclAllReduce fp32");
    Buffer<uint16_t> inplace(count);
    inplace.put(mine_bf16);
    nccl_ok(ncclAllReduce(inplace.device, inplace.device, count, ncclBfloat16, op, comm, stream),
            "ncclAllReduce bf16 in place");
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const std::vector<float> f32 = out.get();
    const std::vector<uint16_t> b16 = inplace.get();
    for (size_t i = 0; i < count; ++i) {
      require(close_to(f32[i], want[i], 1e-6), "fp32 element " + std::to_string(i) + ": " +
                                                   std::to_string(f32[i]) +
                                                   " != " + std::to_string(want[i]));
      const float got = dsx::kernels::bf16_to_float(b16[i]);
      require(close_to(got, want[i], 1.0 / 128), "bf16 element " + std::to_string(i) + ": " +
                                                     std::to_string(got) +
                                                     " != " + std::to_string(want[i]));
    }
    hash = hash * 31 + hash_bytes(f32.data(), count * 4) + hash_bytes(b16.data(), count * 2);
  }
  me.board.hash[me.rank] = hash;
  nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
}

TEST(EmulatedNccl, AllReduceOnTwoRanks) { EXPECT_EQ(run_ranks(2, allreduces), ""); }

TEST(EmulatedNccl, AllReduceOnThreeRanksIsBitIdenticalEverywhere) {
  // The hashes travel through a second board: run_ranks unmaps its own.
  static auto* hashes = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  EXPECT_EQ(run_ranks(3,
                      [](Rank& me) {
                        allreduces(me);
                        hashes[me.rank] = me.board.hash[me.rank].load();
                      }),
            "");
  EXPECT_NE(hashes[0].load(), 0u);
  EXPECT_EQ(hashes[0].load(), hashes[1].load());
  EXPECT_EQ(hashes[0].load(), hashes[2].load());
}

// Reduce-scatter, allgather and broadcast, in and out of place, with per-rank parts larger
// than the 1 MiB staging slot.
TEST(EmulatedNccl, ReduceScatterAllGatherBroadcastBeyondTheStagingArea) {
  EXPECT_EQ(
      run_ranks(3,
                [](Rank& me) {
                  ncclComm_t comm = join(me);
                  cudaStream_t stream;
                  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
                  const size_t part = 300001, n = size_t(me.n);  // 1.2 MB per rank
                  std::vector<float> mine(part * n);
                  for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(me.rank, i);
                  Buffer<float> full(part * n), piece(part);
                  full.put(mine);
                  nccl_ok(ncclReduceScatter(full.device, piece.device, part, ncclFloat32, ncclSum,
                                            comm, stream),
                          "ncclReduceScatter");
                  cuda_ok(cudaStreamSynchronize(stream), "sync");
                  std::vector<float> got = piece.get();
                  for (size_t i = 0; i < part; ++i) {
                    double want = 0;
                    for (int r = 0; r < me.n; ++r) want += value(r, size_t(me.rank) * part + i);
                    require(close_to(got[i], want, 1e-6),
                            "reduce-scatter element " + std::to_string(i));
                  }
                  // Allgather in place: this rank's part already lies at its offset.
                  Buffer<float> gathered(part * n);
                  std::vector<float> start(part * n, -99.0f);
                  for (size_t i = 0; i < part; ++i)
                    start[size_t(me.rank) * part + i] = value(me.rank, i);
                  gathered.put(start);
                  nccl_ok(ncclAllGather(gathered.device + size_t(me.rank) * part, gathered.device,
                                        part, ncclFloat32, comm, stream),
                          "ncclAllGather");
                  // Broadcast from rank 1, out of place on the others.
                  Buffer<float> from(part), to(part);
                  from.put(std::vector<float>(mine.begin(), mine.begin() + long(part)));
                  nccl_ok(ncclBroadcast(from.device, to.device, part, ncclFloat32, 1, comm, stream),
                          "ncclBroadcast");
                  cuda_ok(cudaStreamSynchronize(stream), "sync");
                  got = gathered.get();
                  for (size_t i = 0; i < part * n; ++i)
                    require(got[i] == value(int(i / part), i % part),
                            "allgather element " + std::to_string(i));
                  got = to.get();
                  for (size_t i = 0; i < part; ++i)
                    require(got[i] == value(1, i), "broadcast element " + std::to_string(i));
                  nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
                }),
      "");
}

TEST(EmulatedNccl, LargeAllReduceGoesThroughInChunks) {
  EXPECT_EQ(run_ranks(2,
                      [](Rank& me) {
                        ncclComm_t comm = join(me);
                        const size_t count = (size_t{3} << 20) / 4 + 7;  // 3 MiB and a bit, fp32
                        std::vector<float> mine(count);
                        for (size_t i = 0; i < count; ++i) mine[i] = value(me.rank, i);
                        Buffer<float> data(count);
                        data.put(mine);
                        nccl_ok(ncclAllReduce(data.device, data.device, count, ncclFloat32, ncclSum,
                                              comm, nullptr),
                                "ncclAllReduce");
                        cuda_ok(cudaStreamSynchronize(nullptr), "sync");
                        const std::vector<float> got = data.get();
                        for (size_t i = 0; i < count; ++i)
                          require(got[i] == value(0, i) + value(1, i),
                                  "element " + std::to_string(i));
                        nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
                      }),
            "");
}

// Each rank sends two messages to the next and receives two from the previous, grouped: the
// first is larger than the pair's ring, the second must arrive after it.
void ring_exchange(Rank& me) {
  ncclComm_t comm = join(me);
  cudaStream_t stream;
  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  const int next = (me.rank + 1) % me.n, prev = (me.rank + me.n - 1) % me.n;
  const size_t big = 70001, small = 10;
  std::vector<float> mine(big + small);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(me.rank, i);
  Buffer<float> out(big + small), in(big + small);
  out.put(mine);
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  nccl_ok(ncclSend(out.device, big, ncclFloat32, next, comm, stream), "ncclSend");
  nccl_ok(ncclSend(out.device + big, small, ncclFloat32, next, comm, stream), "ncclSend");
  nccl_ok(ncclRecv(in.device, big, ncclFloat32, prev, comm, stream), "ncclRecv");
  nccl_ok(ncclRecv(in.device + big, small, ncclFloat32, prev, comm, stream), "ncclRecv");
  nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
  cuda_ok(cudaStreamSynchronize(stream), "sync");
  const std::vector<float> got = in.get();
  for (size_t i = 0; i < got.size(); ++i)
    require(got[i] == value(prev, i), "element " + std::to_string(i));
  ncclResult_t async;
  nccl_ok(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
  require(async == ncclSuccess, "an async error after the exchange");
  nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
}

TEST(EmulatedNccl, GroupedSendRecvRingOnTwoRanks) { EXPECT_EQ(run_ranks(2, ring_exchange), ""); }
TEST(EmulatedNccl, GroupedSendRecvRingOnThreeRanks) { EXPECT_EQ(run_ranks(3, ring_exchange), ""); }
TEST(EmulatedNccl, GroupedSendRecvToItself) { EXPECT_EQ(run_ranks(1, ring_exchange), ""); }

// Both ranks send first, ungrouped: on NCCL each send waits for a receive queued behind the
// other's send. The emulation reports it as an async error, and the stream moves on.
TEST(EmulatedNccl, UngroupedSendSendDeadlockEndsInAnAsyncError) {
  EXPECT_EQ(run_ranks(
                2,
                [](Rank& me) {
                  ncclComm_t comm = join(me);
                  cudaStream_t stream;
                  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
                  Buffer<float> out(1000), in(1000);
                  const int peer = 1 - me.rank;
                  const auto start = Clock::now();
                  nccl_ok(ncclSend(out.device, 1000, ncclFloat32, peer, comm, stream), "ncclSend");
                  nccl_ok(ncclRecv(in.device, 1000, ncclFloat32, peer, comm, stream), "ncclRecv");
                  ncclResult_t async = ncclSuccess;
                  while (async == ncclSuccess) {
                    require(Clock::now() - start < 20s, "no async error after 20 s");
                    nccl_ok(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
                    std::this_thread::sleep_for(5ms);
                  }
                  require(Clock::now() - start > 1500ms, "the error came before the timeout");
                  require(async == ncclSystemError,
                          std::string("async error ") + ncclGetErrorString(async));
                  const std::string message = ncclGetLastError(comm);
                  require(
                      message.find("ncclSend to rank " + std::to_string(peer) +
                                   " waited 2 s for a matching ncclRecv") != std::string::npos &&
                          message.find("ncclGroupStart/End") != std::string::npos,
                      "the message: " + message);
                  cuda_ok(cudaStreamSynchronize(stream), "the stream after the error");
                  meet(me.board, me.n, 0);  // neither aborts before both saw their own timeout
                  nccl_ok(ncclCommAbort(comm), "ncclCommAbort");
                },
                60s, "2"),
            "");
}

// NCCL refuses two ranks of one communicator on one GPU: here both ranks see GPU 1, as device 0
// of CUDA_VISIBLE_DEVICES=1 and as device 1 of CUDA_VISIBLE_DEVICES=0,1.
TEST(EmulatedNccl, TwoRanksOnOneGpuAreRefused) {
  EXPECT_EQ(run_ranks(2,
                      [](Rank& me) {
                        setenv("CUDA_VISIBLE_DEVICES", me.rank == 0 ? "1" : "0,1", 1);
                        cuda_ok(cudaSetDevice(me.rank), "cudaSetDevice");
                        ncclComm_t comm = nullptr;
                        const ncclResult_t r = ncclCommInitRank(&comm, me.n, me.id, me.rank);
                        require(r == ncclInvalidUsage,
                                std::string("ncclCommInitRank: ") + ncclGetErrorString(r));
                        const std::string message = ncclGetLastError(nullptr);
                        require(message.find("both use GPU 1") != std::string::npos,
                                "the message: " + message);
                        require(comm == nullptr, "a communicator anyway");
                      }),
            "");
}

TEST(EmulatedNccl, BadStreamsAndBuffersAreRefusedAtTheCall) {
  EXPECT_EQ(run_ranks(1,
                      [](Rank& me) {
                        ncclComm_t comm = join(me, 2);
                        int device = -1, rank = -1, count = 0;
                        nccl_ok(ncclCommCuDevice(comm, &device), "ncclCommCuDevice");
                        nccl_ok(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
                        nccl_ok(ncclCommCount(comm, &count), "ncclCommCount");
                        require(device == 2 && rank == 0 && count == 1,
                                "the communicator's device, rank or size");
                        Buffer<float> data(100);
                        std::vector<float> host(100, 1.0f);
                        require(ncclAllReduce(host.data(), host.data(), 100, ncclFloat32, ncclSum,
                                              comm, nullptr) == ncclInvalidArgument,
                                "host memory accepted");
                        require(ncclAllReduce(data.device, data.device, 200, ncclFloat32, ncclSum,
                                              comm, nullptr) == ncclInvalidArgument,
                                "a count past the allocation (rounded to 256 bytes) accepted");
                        data.put(host);  // on device 2's stream 0, as the allreduce below
                        cuda_ok(cudaSetDevice(3), "cudaSetDevice");
                        cudaStream_t other;
                        cuda_ok(cudaStreamCreate(&other), "cudaStreamCreate");
                        Buffer<float> elsewhere(100);
                        require(ncclAllReduce(data.device, data.device, 100, ncclFloat32, ncclSum,
                                              comm, other) == ncclInvalidArgument,
                                "a stream of another device accepted");
                        require(ncclAllReduce(elsewhere.device, elsewhere.device, 100, ncclFloat32,
                                              ncclSum, comm, nullptr) == ncclInvalidArgument,
                                "a buffer of another device accepted");
                        // Stream 0 is the communicator's device's, whatever is current.
                        nccl_ok(ncclAllReduce(data.device, data.device, 100, ncclFloat32, ncclAvg,
                                              comm, nullptr),
                                "ncclAllReduce on one rank");
                        cuda_ok(cudaSetDevice(2), "cudaSetDevice");
                        require(data.get()[99] == 1.0f, "one rank's average");
                        nccl_ok(ncclCommFinalize(comm), "ncclCommFinalize");
                        nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
                      }),
            "");
}

// Ranks that disagree on a collective get ncclInvalidUsage naming both calls, not a hang; a
// call refused inside a group fails the group at ncclGroupEnd.
TEST(EmulatedNccl, MismatchedCollectivesAndRefusedGroupsAreReported) {
  EXPECT_EQ(
      run_ranks(2,
                [](Rank& me) {
                  ncclComm_t comm = join(me);
                  Buffer<float> data(20);
                  std::vector<float> host(20);
                  require(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
                  require(ncclSend(host.data(), 20, ncclFloat32, 1 - me.rank, comm, nullptr) ==
                              ncclInvalidArgument,
                          "a send of host memory accepted");
                  require(ncclGroupEnd() == ncclInvalidArgument, "the group went out anyway");
                  nccl_ok(ncclAllReduce(data.device, data.device, me.rank ? 20 : 10, ncclFloat32,
                                        ncclSum, comm, nullptr),
                          "ncclAllReduce");
                  cuda_ok(cudaStreamSynchronize(nullptr), "sync");
                  ncclResult_t async;
                  nccl_ok(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
                  require(async == ncclInvalidUsage,
                          std::string("async error ") + ncclGetErrorString(async));
                  const std::string message = ncclGetLastError(comm);
                  require(
                      message.find("ncclAllReduce of 10 ncclFloat32 with ncclSum on rank 0") !=
                              std::string::npos &&
                          message.find("ncclAllReduce of 20 ncclFloat32 with ncclSum on rank 1") !=
                              std::string::npos,
                      "the message: " + message);
                  require(ncclAllReduce(data.device, data.device, 1, ncclFloat32, ncclSum, comm,
                                        nullptr) == ncclInvalidUsage,
                          "a collective after the error accepted");
                  meet(me.board, me.n, 0);
                  nccl_ok(ncclCommAbort(comm), "ncclCommAbort");
                }),
      "");
}

// As dsx runs it: a non-blocking communicator whose finalize reports ncclInProgress until done.
TEST(EmulatedNccl, NonBlockingFinalizeEndsInSuccess) {
  EXPECT_EQ(run_ranks(2,
                      [](Rank& me) {
                        cuda_ok(cudaSetDevice(me.rank), "cudaSetDevice");
                        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
                        config.blocking = 0;
                        ncclComm_t comm = nullptr;
                        nccl_ok(ncclCommInitRankConfig(&comm, me.n, me.id, me.rank, &config),
                                "ncclCommInitRankConfig");
                        Buffer<float> data(1 << 20);
                        nccl_ok(ncclAllReduce(data.device, data.device, 1 << 20, ncclFloat32,
                                              ncclSum, comm, nullptr),
                                "ncclAllReduce");
                        const ncclResult_t r = ncclCommFinalize(comm);
                        require(r == ncclSuccess || r == ncclInProgress,
                                std::string("ncclCommFinalize: ") + ncclGetErrorString(r));
                        ncclResult_t state = ncclInProgress;
                        const auto start = Clock::now();
                        while (state == ncclInProgress) {
                          require(Clock::now() - start < 20s, "still in progress after 20 s");
                          nccl_ok(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError");
                        }
                        require(state == ncclSuccess,
                                std::string("the state: ") + ncclGetErrorString(state));
                        nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
                      }),
            "");
}

// A rank that dies is named in the others' async error long before the timeout.
TEST(EmulatedNccl, ADeadRankIsNamed) {
  EXPECT_EQ(run_ranks(2,
                      [](Rank& me) {
                        ncclComm_t comm = join(me);
                        if (me.rank == 1) _exit(0);  // gone without a word
                        Buffer<float> data(10);
                        const auto start = Clock::now();
                        nccl_ok(ncclAllReduce(data.device, data.device, 10, ncclFloat32, ncclSum,
                                              comm, nullptr),
                                "ncclAllReduce");
                        ncclResult_t async = ncclSuccess;
                        while (async == ncclSuccess) {
                          require(Clock::now() - start < 20s, "no async error after 20 s");
                          nccl_ok(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
                          std::this_thread::sleep_for(5ms);
                        }
                        require(async == ncclRemoteError,
                                std::string("async error ") + ncclGetErrorString(async));
                        const std::string message = ncclGetLastError(comm);
                        require(message.find("rank 1 (process") != std::string::npos &&
                                    message.find("exited") != std::string::npos,
                                "the message: " + message);
                        nccl_ok(ncclCommAbort(comm), "ncclCommAbort");
                      }),
            "");
}

// ncclCommAbort ends a wait at once: rank 0's allreduce waits for rank 1, which never joins it.
TEST(EmulatedNccl, AbortEndsPendingWaitsAtOnce) {
  EXPECT_EQ(run_ranks(2,
                      [](Rank& me) {
                        ncclComm_t comm = join(me);
                        if (me.rank == 1) {
                          meet(me.board, 2, 0);
                          nccl_ok(ncclCommDestroy(comm), "ncclCommDestroy");
                          return;
                        }
                        cudaStream_t stream;
                        cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
                        Buffer<float> data(10);
                        nccl_ok(ncclAllReduce(data.device, data.device, 10, ncclFloat32, ncclSum,
                                              comm, stream),
                                "ncclAllReduce");
                        std::this_thread::sleep_for(300ms);
                        require(cudaStreamQuery(stream) == cudaErrorNotReady,
                                "the allreduce did not wait");
                        const auto start = Clock::now();
                        nccl_ok(ncclCommAbort(comm), "ncclCommAbort");
                        cuda_ok(cudaStreamSynchronize(stream), "the stream after the abort");
                        require(Clock::now() - start < 2s, "the abort took long");
                        meet(me.board, 2, 0);
                      }),
            "");
}

}  // namespace
