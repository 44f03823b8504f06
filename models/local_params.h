// The simple owner of a model's parameters and gradients, without ZeRO: two host buffers of
// Model::num_params() elements in the model's flat layout. Used by tests, `dsx sample`, the
// benchmarks and single-process training. acquire/release/ready do nothing: everything is
// always resident. T is the model's element type (float, or double for the reference model).
#pragma once

#include <algorithm>
#include <vector>

#include "models/model.h"

namespace dsx::models {

template <class T>
class LocalParams final : public ParamAccess, public GradSink {
 public:
  explicit LocalParams(const Model& model)
      : specs_(model.params()), params_(model.num_params()), grads_(model.num_params()) {}

  T* params() { return params_.data(); }
  const T* params() const { return params_.data(); }
  T* grads() { return grads_.data(); }
  const T* grads() const { return grads_.data(); }
  size_t size() const { return params_.size(); }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  void zero_grads() { std::fill(grads_.begin(), grads_.end(), T(0)); }

  void acquire(int) override {}
  void release(int) override {}
  const void* param(size_t index) override { return params_.data() + specs_.at(index).offset; }
  void* grad(size_t index) override { return grads_.data() + specs_.at(index).offset; }
  void ready(int) override {}

 private:
  std::vector<ParamSpec> specs_;
  std::vector<T> params_;
  std::vector<T> grads_;
};

}  // namespace dsx::models
