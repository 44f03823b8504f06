// ZeRO stage 3 with its state on NVMe, on 2 real ranks, in fp32 and bf16: parameters swapped
// (offload_param "nvme", with and without the optimizer state and fp32 master swapped too) give
// the weights, the fp32 master and the optimizer state of the run in memory, bit for bit. Each
// gradient depends on the weights the model read, so a stale or wrong swapped layer shows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "tests/comm/comm_harness.h"
#include "tests/zero/hand_backward.h"
#include "zero/zero_engine.h"

namespace {

using dsx::kernels::DType;
using dsx::zero::ZeroEngine;
using dsx::zero::ZeroOptions;

// A micro-step: forward reads every layer; backward sets each gradient to 0.1 * weight + value(l)
// from the weights it reads again, in the model's dtype.
void weight_dependent_step(ZeroEngine& z, const std::vector<dsx::zero::ModelParam>& ps, int layers,
                           DType dtype, int rank) {
  dsx::test::forward(z, layers);
  z.begin_backward();
  for (int l = layers - 1; l >= 0; --l) {
    z.prefetch(l - 1);
    z.acquire(l);
    for (size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].info.layer != l) continue;
      const float value = 0.01f * static_cast<float>((rank + 1) * (l + 2));
      for (size_t k = 0; k < ps[i].info.numel; ++k) {
        if (dtype == DType::F32) {
          const float w = static_cast<const float*>(z.param(i))[k];
          static_cast<float*>(z.grad(i))[k] = 0.1f * w + value;
        } else {
          const float w = dsx::kernels::bf16_to_float(static_cast<const uint16_t*>(z.param(i))[k]);
          static_cast<uint16_t*>(z.grad(i))[k] = dsx::kernels::float_to_bf16(0.1f * w + value);
        }
      }
    }
    z.release(l);
    z.grad_ready(l);
  }
  z.end_micro_step();
}

struct Outcome {
  std::vector<float> weights;
  ZeroEngine::PartitionState partition;
};

class ZeroSwap : public ::testing::TestWithParam<DType> {};

TEST_P(ZeroSwap, SwappedStateGivesTheSameNumbersBitForBit) {
  const DType dtype = GetParam();
  const auto ps = dsx::test::params_of(5, 1703);  // layers of about 1700: 2 swapped per buffer
  const auto root =
      std::filesystem::path(DSX_BINARY_DIR) /
      ("test_zero_swap_" + std::to_string(::getpid()) + "_" + dsx::kernels::dtype_name(dtype));
  auto job = dsx::test::run_job(
      2, dsx::test::test_options("tcp"), [&](dsx::comm::Communicator& comm, int rank) {
        std::vector<float> init(dsx::test::total(ps));
        for (size_t i = 0; i < init.size(); ++i)
          init[i] = 0.25f + 0.001f * static_cast<float>(i % 97);
        std::vector<Outcome> runs;
        for (int swapped = 0; swapped < 3; ++swapped) {  // none, parameters, parameters + optimizer
          ZeroOptions o = dsx::test::sgd_options(3);
          o.optimizer.type = dsx::zero::OptimizerType::Adam;
          o.optimizer.adam.lr = 1e-2f;
          o.model_dtype = dtype;
          const std::string nvme = (root / ("rank" + std::to_string(rank))).string();
          if (swapped >= 1) {
            std::filesystem::create_directories(nvme);
            o.param_nvme = dsx::zero::ParamSwapOptions{nvme, 2, 2000, 1800, false, {}};
          }
          if (swapped == 2) {
            o.optimizer_nvme = dsx::zero::OptimizerSwapOptions{};
            o.optimizer_nvme->nvme_path = nvme;
            o.optimizer_nvme->sub_group_size = 1500;
            o.optimizer_nvme->swap_master = true;
          }
          ZeroEngine z(ps, 5, init.data(), o, comm);
          for (int step = 0; step < 3; ++step) {
            weight_dependent_step(z, ps, 5, dtype, rank);
            z.step({1e-2, {}, {}});
          }
          Outcome out;
          out.weights.resize(init.size());
          z.gather_params(out.weights.data());
          out.partition = z.save_partition();
          runs.push_back(std::move(out));
        }
        for (size_t s = 1; s < runs.size(); ++s) {
          const std::string what =
              s == 1 ? "parameters swapped" : "parameters and optimizer swapped";
          if (runs[s].weights != runs[0].weights)
            throw std::runtime_error(what + ": the weights differ");
          if (runs[s].partition.master != runs[0].partition.master)
            throw std::runtime_error(what + ": the fp32 master differs");
          if (runs[s].partition.optimizer != runs[0].partition.optimizer)
            throw std::runtime_error(what + ": the optimizer state differs");
        }
        if (runs[0].weights == init) throw std::runtime_error("the steps did not move the weights");
      });
  EXPECT_TRUE(job.all_ok()) << job.summary();
  std::filesystem::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ZeroSwap, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) {
                           return std::string(dsx::kernels::dtype_name(info.param));
                         });

}  // namespace
