// The Communicator's contract beyond single collectives: many operations in flight complete in
// issue order with the right data, sub-groups talk only among their members, point-to-point
// transfers arrive intact, registration-cached buffers work, and wait() honours its timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <numeric>
#include <thread>

#include "tests/comm/comm_harness.h"

namespace dsx::comm {
namespace {

using test::run_job;
using test::test_options;
using namespace std::chrono_literals;

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

TEST(Communicator, ManyOperationsInFlightCompleteInIssueOrder) {
  auto body = [](Communicator& comm, int rank) {
    const int p = comm.size();
    const int ops = 40;
    std::vector<std::vector<float>> buffers;
    std::vector<WorkHandle> works;
    for (int k = 0; k < ops; ++k) {
      // small and large: every algorithm interleaves, the one-step path's attempts included
      size_t n = k % 4 == 0 ? 3 : 100 + static_cast<size_t>(k) * 97;
      buffers.emplace_back(n, static_cast<float>(rank + k));
    }
    for (int k = 0; k < ops; ++k) {
      works.push_back(comm.allreduce(buffers[static_cast<size_t>(k)].data(), buffers[static_cast<size_t>(k)].size(),
                                     DType::F32, ReduceOp::Sum));
    }
    // Completion order: whenever op k is done, every earlier op is done too.
    for (int k = ops - 1; k >= 0; --k) {
      works[static_cast<size_t>(k)]->wait(30s);
      for (int j = 0; j < k; ++j) expect(works[static_cast<size_t>(j)]->done(), "op " + std::to_string(j) + " finished after op " + std::to_string(k));
    }
    for (int k = 0; k < ops; ++k) {
      float want = static_cast<float>(p * (p - 1) / 2 + p * k);
      for (float v : buffers[static_cast<size_t>(k)]) expect(v == want, "op " + std::to_string(k) + " got " + std::to_string(v));
    }
  };
  auto result = run_job(3, test_options("shm"), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(Communicator, SubGroupsTalkOnlyAmongTheirMembers) {
  auto body = [](Communicator& world, int rank) {
    // Even and odd ranks; and a third group whose list order renumbers its members.
    auto parity = world.new_group(rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3});
    expect(parity->size() == 2 && parity->rank() == rank / 2, "parity group rank");
    std::vector<float> x(3000, static_cast<float>(rank + 1));
    parity->allreduce(x.data(), x.size(), DType::F32, ReduceOp::Sum)->wait();
    float want = rank % 2 == 0 ? 1 + 3 : 2 + 4;
    for (float v : x) expect(v == want, "parity group sum " + std::to_string(v));

    if (rank != 2) {
      auto odd_order = world.new_group({3, 0, 1});
      int expected_rank = rank == 3 ? 0 : rank == 0 ? 1 : 2;
      expect(odd_order->rank() == expected_rank, "group rank follows the list order");
      std::vector<float> all(3);
      float mine = static_cast<float>(10 * rank);
      odd_order->allgather(&mine, all.data(), 1, DType::F32)->wait();
      expect(all == std::vector<float>({30, 0, 10}), "allgather in list order");
      std::vector<float> b(5000, rank == 1 ? 7.0f : 0.0f);
      odd_order->broadcast(b.data(), b.size(), DType::F32, 2)->wait();  // group rank 2 = world rank 1
      for (float v : b) expect(v == 7.0f, "group broadcast");
    }
    world.barrier()->wait();
  };
  auto result = run_job(4, test_options("tcp"), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(Communicator, SendAndRecvCarryMessagesIntact) {
  auto body = [](Communicator& comm, int rank) {
    const int p = comm.size();
    const size_t n = (1 << 20) + 3;  // large enough for the providers' rendezvous protocol
    std::vector<uint16_t> out(n), in(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(i * 31 + static_cast<size_t>(rank));
    int right = (rank + 1) % p, left = (rank - 1 + p) % p;
    // Around the ring: even ranks send first, odd ranks receive first.
    for (int round = 0; round < 2; ++round) {
      if (rank % 2 == 0) {
        comm.send(out.data(), n, DType::BF16, right)->wait();
        comm.recv(in.data(), n, DType::BF16, left)->wait();
      } else {
        comm.recv(in.data(), n, DType::BF16, left)->wait();
        comm.send(out.data(), n, DType::BF16, right)->wait();
      }
      for (size_t i = 0; i < n; i += 4099) {
        expect(in[i] == static_cast<uint16_t>(i * 31 + static_cast<size_t>(left)), "p2p element " + std::to_string(i));
      }
      expect(in[n - 1] == static_cast<uint16_t>((n - 1) * 31 + static_cast<size_t>(left)), "p2p last element");
    }
  };
  auto result = run_job(2, test_options("shm"), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(Communicator, RegisteredBuffersGiveTheSameResults) {
  auto options = test_options("tcp");
  options.force_registration = true;  // every buffer goes through the registration cache
  auto body = [](Communicator& comm, int rank) {
    std::vector<float> x(10000);
    for (int round = 0; round < 3; ++round) {
      std::iota(x.begin(), x.end(), static_cast<float>(rank));
      comm.allreduce(x.data(), x.size(), DType::F32, ReduceOp::Max)->wait();
      for (size_t i = 0; i < x.size(); ++i) expect(x[i] == static_cast<float>(i + 2), "registered allreduce");
    }
  };
  auto result = run_job(3, options, body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

// Over shm, 1000 floats go through the segments' rounds on the worker; 4 floats take the one-step
// path, tried on the caller's thread first - which must give up at once when the peer is late,
// not block allreduce() until it comes.
void expect_wait_times_out_while_the_peer_is_late(size_t count) {
  auto body = [count](Communicator& comm, int rank) {
    std::vector<float> x(count, 1.0f);
    if (rank == 1) std::this_thread::sleep_for(1500ms);
    const auto issued = std::chrono::steady_clock::now();
    auto work = comm.allreduce(x.data(), x.size(), DType::F32, ReduceOp::Sum);
    expect(std::chrono::steady_clock::now() - issued < 500ms, "allreduce() blocked while the peer was late");
    if (rank == 0) {
      bool timed_out = false;
      try {
        work->wait(200ms);
      } catch (const Error& e) {
        timed_out = e.kind() == ErrorKind::Timeout && std::string(e.what()).find("still running") != std::string::npos;
      }
      expect(timed_out, "wait(200ms) should time out while rank 1 sleeps");
    }
    work->wait();
    for (float v : x) expect(v == 2.0f, "allreduce after a late peer");
  };
  auto result = run_job(2, test_options("shm"), body);
  EXPECT_TRUE(result.all_ok()) << result.summary();
}

TEST(Communicator, WaitTimesOutWhileThePeerIsLateThenSucceeds) { expect_wait_times_out_while_the_peer_is_late(1000); }

TEST(Communicator, SmallAllreduceTriedOnTheCallersThreadNeverBlocksIt) {
  expect_wait_times_out_while_the_peer_is_late(4);
}

}  // namespace
}  // namespace dsx::comm
