// A cpu device that forgets one event wait: every call goes to a real cpu device (with the
// stream-order checker on), except that the streams it hands out skip the wait numbered `drop`
// (counting every Stream::wait from 0). ZeRO run on it shows whether each wait it makes is needed
// and whether the checker notices its absence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device/cpu_device.h"

namespace dsx::test {

class DroppingDevice final : public device::Device {
 public:
  // drop < 0: drop nothing (count only).
  explicit DroppingDevice(long drop) : drop_(drop) {
    device::CpuDeviceOptions o;
    o.check_order = true;
    o.max_delay_us = 20;
    o.timeout = std::chrono::seconds(20);
    inner_ = device::make_cpu_device(o);
    compute_ = std::make_unique<Wrapped>(inner_->compute_stream(), *this, false);
  }
  long waits() const { return waits_; }
  // The name of the stream that made each wait, in order.
  const std::vector<std::string>& waiters() const { return waiters_; }
  bool dropped() const { return dropped_; }

  std::string name() const override { return "cpu (dropping wait " + std::to_string(drop_) + ")"; }
  bool host_accessible() const override { return true; }
  device::Stream& compute_stream() override { return *compute_; }
  std::unique_ptr<device::Stream> create_stream(const std::string& name) override {
    return std::make_unique<Wrapped>(*inner_->create_stream(name).release(), *this, true);
  }
  std::unique_ptr<device::Event> create_event() override { return inner_->create_event(); }
  std::unique_ptr<device::Event> create_timed_event() override {
    return inner_->create_timed_event();
  }
  double seconds_between(device::Event& a, device::Event& b) override {
    return inner_->seconds_between(a, b);
  }
  void synchronize(device::Event& e, std::chrono::milliseconds t, const char* what) override {
    inner_->synchronize(e, t, what);
  }
  void* allocate(size_t bytes, device::Placement p, device::Stream& s) override {
    return inner_->allocate(bytes, p, in(s));
  }
  void free(void* data, size_t bytes, device::Stream& s) override {
    inner_->free(data, bytes, in(s));
  }
  void* allocate_scratch(size_t bytes, device::Stream& s) override {
    return inner_->allocate_scratch(bytes, in(s));
  }
  void* allocate_now(size_t bytes) override { return inner_->allocate_now(bytes); }
  void free_now(void* data) override { inner_->free_now(data); }
  void* allocate_pinned(size_t bytes) override { return inner_->allocate_pinned(bytes); }
  void free_pinned(void* data) override { inner_->free_pinned(data); }
  void copy_now(void* dst, const void* src, size_t bytes) override {
    inner_->copy_now(dst, src, bytes);
  }
  bool is_device_pointer(const void* data) const override {
    return inner_->is_device_pointer(data);
  }
  void make_current() override { inner_->make_current(); }
  bool query(device::Event& e) override { return inner_->query(e); }
  std::unique_ptr<device::Stream> adopt_stream(void* native, const std::string& name) override {
    return std::make_unique<Wrapped>(*inner_->adopt_stream(native, name).release(), *this, true);
  }
  void fill_bytes(void* dst, unsigned char value, size_t bytes, device::Stream& s) override {
    inner_->fill_bytes(dst, value, bytes, in(s));
  }
  void copy(void* dst, const void* src, size_t bytes, device::Stream& s) override {
    inner_->copy(dst, src, bytes, in(s));
  }
  void fill_zero(void* dst, size_t bytes, device::Stream& s) override {
    inner_->fill_zero(dst, bytes, in(s));
  }
  void scale(device::DType t, void* x, float f, size_t n, device::Stream& s) override {
    inner_->scale(t, x, f, n, in(s));
  }
  void cast(device::DType st, const void* src, device::DType dt, void* dst, size_t n,
            device::Stream& s) override {
    inner_->cast(st, src, dt, dst, n, in(s));
  }
  void sum_blocks(device::DType t, const void* src, size_t blocks, size_t stride, float f,
                  device::DType dt, void* dst, size_t n, bool acc, device::Stream& s) override {
    inner_->sum_blocks(t, src, blocks, stride, f, dt, dst, n, acc, in(s));
  }
  void sum_of_squares(device::DType t, const void* x, size_t n, double* out,
                      device::Stream& s) override {
    inner_->sum_of_squares(t, x, n, out, in(s));
  }
  void narrow_to_float(const double* src, float* dst, size_t n, device::Stream& s) override {
    inner_->narrow_to_float(src, dst, n, in(s));
  }
  void zero_grad_factor(kernels::DeviceSumOfSquares sum, double scale, double max_norm,
                        float* factor, device::Stream& s) override {
    inner_->zero_grad_factor(sum, scale, max_norm, factor, in(s));
  }
  void adam_step(const kernels::AdamHyper& h, int64_t step, kernels::GradFactor gf, float* p,
                 const float* g, float* m, float* v, size_t n, kernels::ParamCopy c,
                 device::Stream& s) override {
    inner_->adam_step(h, step, gf, p, g, m, v, n, c, in(s));
  }
  void lion_step(const kernels::LionHyper& h, kernels::GradFactor gf, float* p, const float* g,
                 float* m, size_t n, kernels::ParamCopy c, device::Stream& s) override {
    inner_->lion_step(h, gf, p, g, m, n, c, in(s));
  }
  void sgd_step(const kernels::SgdHyper& h, int64_t step, kernels::GradFactor gf, float* p,
                const float* g, float* m, size_t n, kernels::ParamCopy c,
                device::Stream& s) override {
    inner_->sgd_step(h, step, gf, p, g, m, n, c, in(s));
  }
  void adagrad_step(const kernels::AdagradHyper& h, kernels::GradFactor gf, float* p,
                    const float* g, float* sq, size_t n, kernels::ParamCopy c,
                    device::Stream& s) override {
    inner_->adagrad_step(h, gf, p, g, sq, n, c, in(s));
  }
  void lamb_prepare(const kernels::LambHyper& h, int64_t step, kernels::GradFactor gf,
                    const float* p, const float* g, float* m, float* v, size_t n, double* norms,
                    device::Stream& s) override {
    inner_->lamb_prepare(h, step, gf, p, g, m, v, n, norms, in(s));
  }
  void lamb_apply(const kernels::LambHyper& h, int64_t step, float* p, const float* m,
                  const float* v, size_t n, const double* norms, kernels::ParamCopy c,
                  device::Stream& s) override {
    inner_->lamb_apply(h, step, p, m, v, n, norms, c, in(s));
  }
  void host_task(device::Stream& s, std::function<void()> fn, std::span<const device::Touch> t,
                 const char* what) override {
    inner_->host_task(in(s), std::move(fn), t, what);
  }
  void host_access(std::span<const device::Touch> t, const char* what) override {
    inner_->host_access(t, what);
  }
  void declare(device::Stream& s, std::span<const device::Touch> t, const char* what) override {
    inner_->declare(in(s), t, what);
  }

 private:
  class Wrapped final : public device::Stream {
   public:
    Wrapped(device::Stream& inner, DroppingDevice& owner, bool owns)
        : inner_(inner), owner_(owner), owns_(owns) {}
    ~Wrapped() override {
      if (owns_) delete &inner_;
    }
    const std::string& name() const override { return inner_.name(); }
    void record(device::Event& e) override { inner_.record(e); }
    void wait(device::Event& e) override {
      owner_.waiters_.push_back(inner_.name());
      if (owner_.waits_++ == owner_.drop_) {
        owner_.dropped_ = true;
        return;
      }
      inner_.wait(e);
    }
    void synchronize(std::chrono::milliseconds t) override { inner_.synchronize(t); }
    device::Stream& inner() { return inner_; }

   private:
    device::Stream& inner_;
    DroppingDevice& owner_;
    bool owns_;
  };
  static device::Stream& in(device::Stream& s) { return static_cast<Wrapped&>(s).inner(); }

  long drop_;
  long waits_ = 0;
  std::vector<std::string> waiters_;
  bool dropped_ = false;
  std::unique_ptr<device::Device> inner_;
  std::unique_ptr<Wrapped> compute_;
};

}  // namespace dsx::test
