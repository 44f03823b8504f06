// The zero_optimization options that change how gradients and parameters travel, each shown by
// numbers on real ranks: reduce_scatter (which collective carries a bucket and how many bytes a
// rank sends), contiguous_gradients (DeepSpeed's routing, and the bucket buffers it keeps),
// allgather_bucket_size (the messages and staging buffers of the parameter allgather) and
// stage3_model_persistence_threshold (how many layers stage 3 keeps gathered). Gradients
// are set by hand, so the weights after a step have a formula too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "tests/comm/comm_harness.h"
#include "tests/zero/counting_communicator.h"
#include "tests/zero/hand_backward.h"
#include "zero/partition_allgather.h"
#include "zero/zero_engine.h"

namespace {

using dsx::test::backward;
using dsx::test::CountingCommunicator;
using dsx::test::params_of;
using dsx::test::sgd_options;
using dsx::test::total;
using dsx::zero::ZeroEngine;
using dsx::zero::ZeroOptions;
using Kind = dsx::zero::MemoryKind;

constexpr int kLayers = 5;
const auto kParams = params_of(kLayers, 301);  // 1550 elements, layers of 308..312

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Rank r's gradient of layer l is 0.01·(r+1)·(l+1); averaged over N ranks 0.005·(N+1)·(l+1).
float grad_of(int rank, int layer) { return 0.01f * float(rank + 1) * float(layer + 1); }

// A ZeroEngine over `counting` from zero parameters, after one backward of rank `rank`'s
// gradients; the counts are of that backward alone.
std::unique_ptr<ZeroEngine> counted_backward(CountingCommunicator& counting, const ZeroOptions& o, int rank) {
  std::vector<float> init(total(kParams), 0.0f);
  auto z = std::make_unique<ZeroEngine>(kParams, kLayers, init.data(), o, counting);
  counting.reset();
  backward(*z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
  return z;
}

// After one SGD step (lr 1) from zero every parameter is minus its averaged gradient.
void expect_one_step_taken(ZeroEngine& z, int world, const std::string& where) {
  std::vector<float> w(total(kParams));
  z.gather_params(w.data());
  for (const auto& p : kParams) {
    const double want = -0.005 * (world + 1) * (p.info.layer + 1);
    for (size_t k = 0; k < p.info.numel; ++k) {
      const double got = w[p.model_offset + k];
      expect(std::abs(got - want) <= 1e-6 * std::abs(want),
             where + ": parameter of layer " + std::to_string(p.info.layer) + " is " + std::to_string(got) +
                 ", expected " + std::to_string(want));
    }
  }
}

size_t partition_numel(int world) {  // stages 1/2: DeepSpeed's 2N padding, cut in N
  const size_t n = total(kParams), unit = 2 * static_cast<size_t>(world);
  return (n + unit - 1) / unit * unit / static_cast<size_t>(world);
}

class ReduceScatter : public ::testing::TestWithParam<std::tuple<int, int>> {};

// One bucket holding the whole model. reduce_scatter (with contiguous_gradients, DeepSpeed's
// defaults) hands each rank only its partition: one reduce-scatter of N blocks of S, (N-1)·S
// elements sent per rank, half of the allreduce's 2(N-1)/N·Ψ with 2 ranks. reduce_scatter false,
// or contiguous_gradients false (DeepSpeed's buffered_reduce_fallback), allreduce the bucket.
TEST_P(ReduceScatter, EachOwnerReceivesOnlyItsRun) {
  const auto [stage, world] = GetParam();
  const size_t psi = total(kParams);
  const size_t S = partition_numel(world);
  auto job = dsx::test::run_job(world, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    struct Case {
      bool reduce_scatter, contiguous;
    };
    for (Case c : {Case{true, true}, Case{false, true}, Case{true, false}}) {
      const std::string where = "rank " + std::to_string(rank) + " reduce_scatter " +
                                std::to_string(c.reduce_scatter) + " contiguous " + std::to_string(c.contiguous);
      ZeroOptions o = sgd_options(stage);
      o.reduce_bucket_size = size_t{1} << 30;
      o.reduce_scatter = c.reduce_scatter;
      o.contiguous_gradients = c.contiguous;
      CountingCommunicator counting(comm);
      std::vector<float> init(psi, 0.0f);
      ZeroEngine z(kParams, kLayers, init.data(), o, counting);
      counting.reset();
      backward(z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
      const auto& rs = counting.count("reduce_scatter");
      const auto& ar = counting.count("allreduce");
      const double bus = z.comm_timing().bus_bytes;
      if (c.reduce_scatter && c.contiguous) {
        expect(rs.calls == 1 && ar.calls == 0, where + ": expected one reduce-scatter");
        expect(rs.counts[0] == S, where + ": block of " + std::to_string(rs.counts[0]) + ", expected " + std::to_string(S));
        expect(bus == double((world - 1) * S * 4), where + ": bus bytes " + std::to_string(bus));
      } else {
        expect(rs.calls == 0 && ar.calls == 1 && ar.counts[0] == psi, where + ": expected one allreduce of the model");
        expect(std::abs(bus - 2.0 * (world - 1) / world * psi * 4) < 1e-6, where + ": bus bytes " + std::to_string(bus));
      }
      z.step({1.0, {}, {}});
      expect_one_step_taken(z, world, where);
    }
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, ReduceScatter,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values(2, 3)));

// Stage 2 with overlap and buckets of 320 elements (about one layer each), reduced by
// reduce-scatter or by allreduce.
ZeroOptions small_overlapped_buckets(bool reduce_scatter) {
  ZeroOptions o = sgd_options(2);
  o.reduce_bucket_size = 320;
  o.overlap_comm = true;
  o.reduce_scatter = reduce_scatter;
  return o;
}

// Buckets of one layer on 3 ranks (partitions of 518 cut the layers at 518 and 1036). Layers 0, 2
// and 4 lie inside the partitions of ranks 0, 1 and 2: the two other ranks send their copies to
// the owner (each rank sends 2 and receives 2). Layer 3 splits 109/202 and goes as a
// reduce-scatter. Layer 1 splits 210/99: a reduce-scatter padded to 210 would move more through
// a rank (2(N-1)·210) than an allreduce (4(N-1)/N·309), so it is allreduced. Fewer bytes overall.
TEST(ReduceScatterSmallBuckets, EachBucketTakesTheCheaperCollective) {
  const int world = 3;
  auto job = dsx::test::run_job(world, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    double bus[2] = {0, 0};
    for (bool reduce_scatter : {true, false}) {
      const ZeroOptions o = small_overlapped_buckets(reduce_scatter);
      CountingCommunicator counting(comm);
      const auto z = counted_backward(counting, o, rank);
      const size_t rs = counting.count("reduce_scatter").calls, ar = counting.count("allreduce").calls;
      const size_t sends = counting.count("send").calls, recvs = counting.count("recv").calls;
      const std::string where = "rank " + std::to_string(rank) + " reduce_scatter " + std::to_string(reduce_scatter);
      expect(reduce_scatter ? rs == 1 && ar == 1 && sends == 2 && recvs == 2 : rs == 0 && ar == 5 && sends + recvs == 0,
             where + ": " + std::to_string(rs) + " reduce-scatters, " + std::to_string(ar) + " allreduces, " +
                 std::to_string(sends) + " sends, " + std::to_string(recvs) + " receives");
      bus[reduce_scatter] = z->comm_timing().bus_bytes;
      z->step({1.0, {}, {}});
      expect_one_step_taken(*z, world, where);
    }
    expect(bus[1] < bus[0], "reduce_scatter sent " + std::to_string(bus[1]) + " bytes, allreduce " + std::to_string(bus[0]));
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

// Two ranks, buckets of one layer (most inside one partition): with reduce_scatter a rank sends
// only its copy of the other rank's elements (plus half of the one bucket that straddles the
// cut), about half of what each rank sends in an allreduce of every bucket.
TEST(ReduceScatterTwoRanks, SendsHalfTheBytesOfAnAllreduce) {
  auto job = dsx::test::run_job(2, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    double bus[2] = {0, 0};
    for (bool reduce_scatter : {true, false}) {
      const ZeroOptions o = small_overlapped_buckets(reduce_scatter);
      std::vector<float> init(total(kParams), 0.0f);
      ZeroEngine z(kParams, kLayers, init.data(), o, comm);
      backward(z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
      bus[reduce_scatter] = z.comm_timing().bus_bytes;
      z.step({1.0, {}, {}});
      expect_one_step_taken(z, 2, "reduce_scatter " + std::to_string(reduce_scatter));
    }
    // layers 308..312 elements; the cut at 776 splits layer 2 (617..927) 159/151
    const double sent = rank == 0 ? 312 + 311 + 159 : 309 + 308 + 159;
    expect(bus[1] == sent * 4, "rank " + std::to_string(rank) + " sent " + std::to_string(bus[1]) + " bytes");
    expect(bus[0] == double(total(kParams)) * 4, "allreduce sent " + std::to_string(bus[0]) + " bytes");
    std::printf("rank %d: %.0f bytes sent with reduce_scatter, %.0f with allreduce (%.3f)\n", rank, bus[1], bus[0],
                bus[1] / bus[0]);
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

// Stage 3 does what DeepSpeed's stage3.py does: reduce-scatter, except with reduce_scatter false
// and contiguous_gradients true, where the bucket is allreduced and each rank keeps its shards.
TEST(ReduceScatterStage3, AllreducesOnlyWithReduceScatterOffAndContiguousBuffers) {
  const int world = 3;
  auto job = dsx::test::run_job(world, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    struct Case {
      bool reduce_scatter, contiguous, allreduce;
    };
    for (Case c : {Case{true, true, false}, Case{false, true, true}, Case{false, false, false}}) {
      ZeroOptions o = sgd_options(3);
      o.reduce_bucket_size = 700;  // buckets of two layers: 3 buckets
      o.reduce_scatter = c.reduce_scatter;
      o.contiguous_gradients = c.contiguous;
      CountingCommunicator counting(comm);
      const auto z = counted_backward(counting, o, rank);
      const size_t rs = counting.count("reduce_scatter").calls, ar = counting.count("allreduce").calls;
      const std::string where = "rank " + std::to_string(rank) + " reduce_scatter " +
                                std::to_string(c.reduce_scatter) + " contiguous " + std::to_string(c.contiguous);
      expect(c.allreduce ? ar == 3 && rs == 0 : rs == 3 && ar == 0,
             where + ": " + std::to_string(rs) + " reduce-scatters, " + std::to_string(ar) + " allreduces");
      z->step({1.0, {}, {}});
      expect_one_step_taken(*z, world, where);
    }
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

// contiguous_gradients keeps the bucket buffers for the next steps (DeepSpeed keeps its bucket
// buffers): one bucket for the model at stage 2 on 2 ranks is a reduce-scatter of 2 blocks of S,
// so 2·S·4 bytes of buffers stay after every step; with false, none stay. With overlap and small
// buckets of varying sizes, the buffers kept after the first step (each grown to the largest
// bucket) serve every later backward: the bytes never change again.
TEST(ContiguousGradients, KeepsTheBucketBuffers) {
  const int world = 2;
  const size_t S = partition_numel(world);
  auto job = dsx::test::run_job(world, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    for (bool contiguous : {true, false}) {
      ZeroOptions o = sgd_options(2);
      o.reduce_bucket_size = size_t{1} << 30;
      o.contiguous_gradients = contiguous;
      o.optimizer.sgd.lr = 0.0f;
      std::vector<float> init(total(kParams), 0.0f);
      ZeroEngine z(kParams, kLayers, init.data(), o, comm);
      for (int step = 0; step < 3; ++step) {
        backward(z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
        z.step({0.0, {}, {}});
        const size_t kept = z.memory().bytes(Kind::Buffers);
        const size_t want = contiguous ? world * S * 4 : 0;
        expect(kept == want, "contiguous " + std::to_string(contiguous) + " step " + std::to_string(step) + ": " +
                                 std::to_string(kept) + " bytes of buffers, expected " + std::to_string(want));
      }
    }
    ZeroOptions o = sgd_options(2);
    o.overlap_comm = true;
    o.reduce_bucket_size = 500;
    std::vector<float> init(total(kParams), 0.0f);
    ZeroEngine z(kParams, kLayers, init.data(), o, comm);
    std::string kept;
    size_t last = 0, changes = 0;
    for (int step = 0; step < 6; ++step) {
      backward(z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
      z.step({1e-3, {}, {}});
      const size_t now = z.memory().bytes(Kind::Buffers);
      kept += std::to_string(now) + " ";
      if (step >= 1) changes += now != last;
      last = now;
    }
    expect(last > 0 && changes == 0, "kept buffers per step: " + kept);
    expect(last <= 3 * 2 * 500 * 4, "more than three buffers of the largest bucket kept: " + kept);
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

// Stage 3 keeps layers of at most stage3_param_persistence_threshold elements gathered, until
// the kept ones would pass stage3_model_persistence_threshold (counted in layer order). One step
// of forward (layers 0..4) and backward (4..0) with every other layer released after use: a kept
// layer is gathered once, a released one twice, except layer 4, used last in forward and first in
// backward (no layers in between, so within any reuse distance).
TEST(ModelPersistence, CapsTheLayersKeptGathered) {
  auto job = dsx::test::run_job(2, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    struct Case {
      int64_t model_threshold;
      size_t gathers;
    };
    // layers hold 308..312 elements: 700 keeps layers 0 and 1 (617), the default (no bound)
    // keeps all five
    const int64_t unbounded = dsx::config::ZeroPartitioning{}.model_persistence_threshold;
    for (Case c : {Case{700, 2 + 2 * 2 + 1}, Case{unbounded, 5}}) {
      ZeroOptions o = sgd_options(3);
      o.param_persistence_threshold = 1000;
      o.model_persistence_threshold = c.model_threshold;
      o.max_reuse_distance = 0;
      o.prefetch_bucket_size = 0;
      CountingCommunicator counting(comm);
      std::vector<float> init(total(kParams), 0.0f);
      ZeroEngine z(kParams, kLayers, init.data(), o, counting);
      counting.reset();
      z.begin_micro_step(true);
      for (int l = 0; l < kLayers; ++l) {
        z.acquire(l);
        z.release(l);
      }
      backward(z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
      const size_t gathers = counting.count("allgather").calls;
      expect(gathers == c.gathers, "model threshold " + std::to_string(c.model_threshold) + ": " +
                                       std::to_string(gathers) + " gathers, expected " + std::to_string(c.gathers));
      z.step({1.0, {}, {}});
      expect_one_step_taken(z, 2, "model threshold " + std::to_string(c.model_threshold));
    }
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

class AllgatherBuckets : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Stages 1/2 gather the updated partitions in shards of s = allgather_bucket_size / N elements
// (even), so no message exceeds the bucket, through two staging buffers of N·s elements counted
// as buffers; the weights are bit for bit those of one allgather in place.
TEST_P(AllgatherBuckets, MessagesAndStagingBoundedByTheBucket) {
  const auto [stage, world] = GetParam();
  const size_t S = partition_numel(world);
  const size_t bucket = 200;
  const size_t shard = bucket / world - (bucket / world) % 2;
  const size_t shards = (S + shard - 1) / shard;
  auto job = dsx::test::run_job(world, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
    std::vector<float> weights[2];
    for (int bucketed = 0; bucketed < 2; ++bucketed) {
      ZeroOptions o = sgd_options(stage);
      o.reduce_bucket_size = size_t{1} << 30;
      o.reduce_scatter = false;  // stage 1 then reduces in place: the staging is the only buffer
      o.contiguous_gradients = false;
      if (bucketed) o.allgather_bucket_size = bucket;
      CountingCommunicator counting(comm);
      std::vector<float> init(total(kParams), 0.0f);
      ZeroEngine z(kParams, kLayers, init.data(), o, counting);
      backward(z, kParams, kLayers, [&](int l) { return grad_of(rank, l); });
      counting.reset();
      z.step({1.0, {}, {}});
      const auto& ag = counting.count("allgather");
      const std::string where = "rank " + std::to_string(rank) + (bucketed ? " bucketed" : " in place");
      if (bucketed) {
        expect(ag.calls == shards, where + ": " + std::to_string(ag.calls) + " allgathers, expected " + std::to_string(shards));
        for (size_t j = 0; j < ag.calls; ++j) {
          expect(ag.counts[j] == std::min(shard, S - j * shard), where + ": allgather " + std::to_string(j) + " of " +
                                                                      std::to_string(ag.counts[j]));
          expect(ag.counts[j] * world <= bucket, where + ": a message larger than the bucket");
        }
        if (stage == 1) {
          const size_t peak = z.memory().peak(Kind::Buffers);
          expect(peak == 2 * world * shard * 4, where + ": staging peak " + std::to_string(peak));
        }
      } else {
        expect(ag.calls == 1 && ag.counts[0] == S, where + ": expected one allgather of the partition");
        if (stage == 1) expect(z.memory().peak(Kind::Buffers) == 0, where + ": in place needs no buffer");
      }
      expect(z.memory().bytes(Kind::Buffers) == 0, where + ": staging left after the step");
      expect_one_step_taken(z, world, where);
      weights[bucketed].resize(total(kParams));
      z.gather_params(weights[bucketed].data());
    }
    expect(std::memcmp(weights[0].data(), weights[1].data(), weights[0].size() * 4) == 0,
           "bucketed and in-place allgather give different weights");
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

// A bucket too small for 2 elements per rank is refused at start-up, saying what to change.
TEST(AllgatherBucketsTooSmall, RefusedWithTheMinimum) {
  auto job = dsx::test::run_job(3, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int) {
    ZeroOptions o = sgd_options(2);
    o.allgather_bucket_size = 5;
    std::vector<float> init(total(kParams), 0.0f);
    try {
      ZeroEngine z(kParams, kLayers, init.data(), o, comm);
    } catch (const dsx::Error& e) {
      const std::string what = e.what();
      expect(what.find("allgather_bucket_size is 5 elements") != std::string::npos &&
                 what.find("at least 6") != std::string::npos,
             "unexpected message: " + what);
      return;
    }
    throw std::runtime_error("an allgather_bucket_size of 5 on 3 ranks was accepted");
  });
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, AllgatherBuckets,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values(2, 3)));

}  // namespace
