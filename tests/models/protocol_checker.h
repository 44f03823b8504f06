// The layer protocol of models/model.h, checked while a model runs forward and backward: a
// ParamAccess and GradSink over another pair (LocalParams, device parameters) that fails the test
// when a layer is acquired twice or released unacquired, a parameter is read or a gradient written
// while its layer is not acquired, or a gradient is written after its layer was ready. Records the
// order of acquires and readies for the test to compare.
#pragma once

#include <gtest/gtest.h>

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
    acquires.push_back(l);
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
  bool nothing_acquired() const { return acquired_.empty(); }
  std::vector<int> order, acquires;  // ready() and acquire() calls, in order

 private:
  models::ParamAccess& params_;
  models::GradSink& grads_;
  std::vector<models::ParamSpec> specs_;
  std::set<int> acquired_, ready_;
};

}  // namespace dsx::test
