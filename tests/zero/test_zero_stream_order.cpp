// ZeRO's event waits, one at a time, taken away: ZeRO at every stage trains two steps on a cpu
// device that drops the k-th wait, for every k. Without the waits that order the work, the run
// must stop with a stream-order violation: the first bucket's wait of each backward (the
// communication stream reads what the model wrote), and at stages 1-3 the compute stream's wait
// for gathered parameters. Waits whose absence changes nothing under CUDA's rules (a later bucket
// whose gradients were written before an earlier bucket's event, a wait after the host already
// synchronized) are counted and printed, not required. The run that drops nothing passes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dsx/error.h"
#include "tests/comm/comm_harness.h"
#include "tests/zero/dropping_device.h"
#include "tests/zero/hand_backward.h"

namespace {

using dsx::test::backward;
using dsx::test::DroppingDevice;
using dsx::test::params_of;
using dsx::test::total;

constexpr int kLayers = 4;
const auto kParams = params_of(kLayers, 101);

// Two steps of hand forward and backward, then the weights.
void train(dsx::zero::ZeroEngine& z) {
  std::vector<float> weights(total(kParams));
  for (int step = 0; step < 2; ++step) {
    dsx::test::forward(z, kLayers);
    backward(z, kParams, kLayers, [](int l) { return 0.01f * float(l + 1); });
    z.step({1e-2, {}, {}});
  }
  z.gather_params(weights.data());
}

dsx::zero::ZeroOptions options_for(int stage) {
  dsx::zero::ZeroOptions o = dsx::test::sgd_options(stage);
  o.overlap_comm = true;
  o.reduce_bucket_size = 150;    // several buckets per backward
  o.prefetch_bucket_size = 250;  // stage 3 gathers ahead
  o.param_persistence_threshold = 0;
  o.max_reuse_distance = 0;  // stage 3 regathers in backward
  o.comm_timeout = std::chrono::seconds(10);
  return o;
}

class DroppedWait : public ::testing::TestWithParam<int> {};

TEST_P(DroppedWait, IsCaughtByTheChecker) {
  const int stage = GetParam();
  auto job = dsx::test::run_job(
      1, dsx::test::test_options("tcp"),
      [&](dsx::comm::Communicator& comm, int) {
        std::vector<float> init(total(kParams), 0.5f);
        long waits = 0;
        std::vector<std::string> waiters;
        {
          DroppingDevice counting(-1);
          dsx::zero::ZeroEngine z(kParams, kLayers, init.data(), options_for(stage), comm,
                                  counting);
          train(z);  // nothing dropped: no violation
          waits = counting.waits();
          waiters = counting.waiters();
        }
        if (waits < 3)
          throw std::runtime_error("only " + std::to_string(waits) + " waits in two steps");
        int caught_comm = 0, caught_compute = 0;
        std::string missed;
        for (long k = 0; k < waits; ++k) {
          DroppingDevice dropping(k);
          std::string report;
          try {
            dsx::zero::ZeroEngine z(kParams, kLayers, init.data(), options_for(stage), comm,
                                    dropping);
            train(z);
          } catch (const dsx::Error& e) {
            report = e.what();
          }
          if (!report.empty() && report.find("stream-order violation") == std::string::npos) {
            throw std::runtime_error("dropping wait " + std::to_string(k) +
                                     " failed otherwise: " + report);
          }
          if (report.empty()) {
            missed += " " + std::to_string(k);
          } else {
            (waiters[static_cast<size_t>(k)] == "compute" ? caught_compute : caught_comm) += 1;
          }
        }
        std::printf(
            "stage %d: %ld waits in two steps; dropped, %d of the communication stream's and %d of "
            "the compute "
            "stream's were caught; redundant:%s\n",
            stage, waits, caught_comm, caught_compute, missed.c_str());
        if (caught_comm < 2)
          throw std::runtime_error("the first bucket's wait of each backward must be needed");
        if (stage > 0 && caught_compute < 2) {
          throw std::runtime_error(
              "the compute stream's wait for gathered parameters must be needed in both steps");
        }
      },
      std::chrono::seconds(240));
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, DroppedWait, ::testing::Values(0, 1, 2, 3));

// An error mid-step (the communication stream failed, as a vanished swap file fails it) with a
// gathered layer still held by the model: the stage 3 engine is destroyed with the checker on,
// and its teardown frees that layer after the model's read of it instead of aborting the process
// on a stream-order violation.
TEST(ZeroTeardown, AfterAFailedGatherFreesInStreamOrder) {
  auto job = dsx::test::run_job(
      1, dsx::test::test_options("tcp"),
      [&](dsx::comm::Communicator& comm, int) {
        std::vector<float> init(total(kParams), 0.5f);
        DroppingDevice device(-1);
        std::string report;
        {
          dsx::zero::ZeroEngine z(kParams, kLayers, init.data(), options_for(3), comm, device);
          z.begin_micro_step(true);
          z.acquire(0);  // read by the model on the compute stream, not released
          device.host_task(
              z.comm_stream(),
              [] { throw dsx::Error(dsx::ErrorKind::Io, "the swap file vanished"); }, {},
              "a failing swap-in");
          try {
            z.acquire(1);
          } catch (const dsx::Error& e) {
            report = e.what();
          }
        }  // the teardown under test: an abort here ends the whole test binary
        if (report.find("the swap file vanished") == std::string::npos)
          throw std::runtime_error("the gather after the failure did not fail with it: " + report);
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(job.all_ok()) << job.summary();
}

}  // namespace
