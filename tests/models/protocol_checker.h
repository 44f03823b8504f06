// The layer protocol of models/model.h, checked while a model runs forward and backward: a
// ParamAccess and GradSink over another pair (LocalParams, device parameters) that fails the test
// when a layer is acquired twice or released unacquired, a parameter is read or a gradient written
// while its layer is not acquired, or a gradient is written after its layer was ready. Records the
// order of acquires (forward's and backward's) and readies for the test to compare.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "models/model.h"

namespace dsx::test {

class ProtocolChecker final : public models::ParamAccess, public models::GradSink {
 public:
  ProtocolChecker(models::ParamAccess& params, models::GradSink& grads, const models::Model& m)
      : params_(params), grads_(grads), specs_(m.params()) {}
  void acquire(int l) override {
    EXPECT_FALSE(acquired_.count(l)) << "layer " << l << " acquired twice";
    acquired_.insert(l);
    (backward_ ? backward_acquires : forward_acquires).push_back(l);
    params_.acquire(l);
  }
  void release(int l) override {
    EXPECT_TRUE(acquired_.count(l)) << "layer " << l << " released but not acquired";
    acquired_.erase(l);
    params_.release(l);
  }
  const void* param(size_t i) override {
    EXPECT_TRUE(acquired_.count(specs_[i].layer)) << specs_[i].name << " read while its layer is not acquired";
    return params_.param(i);
  }
  void* grad(size_t i) override {
    EXPECT_FALSE(ready_.count(specs_[i].layer)) << specs_[i].name << " written after its layer was ready";
    EXPECT_TRUE(acquired_.count(specs_[i].layer)) << specs_[i].name << " written while its layer is not acquired";
    return grads_.grad(i);
  }
  void ready(int l) override {
    EXPECT_TRUE(ready_.insert(l).second) << "layer " << l << " ready twice";
    order.push_back(l);
    grads_.ready(l);
  }
  // One forward of `model` on (tokens, tokens) through this checker, then one backward; neither may
  // leave a layer acquired.
  void run(models::Model& model, const std::vector<int32_t>& tokens, int B, int T) {
    model.forward(tokens.data(), tokens.data(), B, T, *this);
    EXPECT_TRUE(acquired_.empty()) << "forward left layers acquired";
    backward_ = true;
    model.backward(*this, *this, 1.0f);
    EXPECT_TRUE(acquired_.empty()) << "backward left layers acquired";
  }
  std::vector<int> forward_acquires, backward_acquires, order;  // acquire() and ready() calls

 private:
  models::ParamAccess& params_;
  models::GradSink& grads_;
  std::vector<models::ParamSpec> specs_;
  std::set<int> acquired_, ready_;
  bool backward_ = false;
};

}  // namespace dsx::test
