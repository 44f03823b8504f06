// The cpu device (see cpu_device.h): host memory, worker-thread streams, the CPU kernels.
#include "device/cpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <array>
#include <span>

#include "device/cpu_stream.h"
#include "device/stream_checker.h"
#include "dsx/error.h"
#include "kernels/mixed_precision.h"
#include "kernels/optimizers.h"
#include "kernels/reduce.h"

namespace dsx::device {
namespace {

using cpu::as_cpu;
using cpu::CpuStream;

long env_number(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0) {
    throw Error(ErrorKind::Usage,
                std::string(name) + "='" + v + "' must be a non-negative whole number");
  }
  return n;
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions options) : options_(std::move(options)) {
    if (options_.check_order) checker_ = std::make_unique<StreamChecker>();
    compute_ = std::make_unique<CpuStream>("compute", true, checker_.get(), 0, options_.seed,
                                           options_.timeout);
  }

  std::string name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }
  Stream& compute_stream() override { return *compute_; }

  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CpuStream>(name, false, checker_.get(), options_.max_delay_us,
                                       options_.seed * 1000003u + ++streams_, options_.timeout);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<cpu::CpuEvent>(); }
  std::unique_ptr<Event> create_timed_event() override { return create_event(); }
  double seconds_between(Event& from, Event& to) override {
    cpu::CpuEvent& a = as_cpu(from);
    cpu::CpuEvent& b = as_cpu(to);
    if (!a.fence || !b.fence) return 0.0;
    return std::chrono::duration<double>(b.fence->signalled_at() - a.fence->signalled_at()).count();
  }

  void synchronize(Event& event, std::chrono::milliseconds timeout, const char* what) override {
    cpu::CpuEvent& e = as_cpu(event);
    if (!e.fence) return;
    if (!e.fence->wait_for(timeout)) {
      throw Error(ErrorKind::Timeout, std::string("waited ") +
                                          std::to_string(timeout.count() / 1000) + " s for " +
                                          what + " (stream '" + e.recorded_on +
                                          "'); a collective on it may wait "
                                          "for a dead or slow peer");
    }
    if (auto error = e.fence->error()) throw *error;
    if (checker_) checker_->merge(StreamChecker::kHost, e.clock);
  }

  void* allocate(size_t bytes, Placement placement, Stream& stream) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    if (placement == Placement::Communicated && options_.allocate_communicated)
      p = options_.allocate_communicated(bytes);
    if (!p) p = host_allocate(bytes);
    if (checker_) {
      checker_->forget(p, bytes);
      const Touch t{p, bytes, Access::Write};
      checker_->access(as_cpu(stream).actor(), {&t, 1}, "allocate");
    }
    return p;
  }

  void free(void* data, size_t bytes, Stream& stream) override {
    if (!data) return;
    if (checker_) {
      const Touch t{data, bytes, Access::Write};
      checker_->access(as_cpu(stream).actor(), {&t, 1}, "free");
      checker_->forget(data, bytes);
    }
    auto release = options_.free_communicated;
    as_cpu(stream).enqueue([data, release] {
      if (!release || !release(data)) std::free(data);
    });
  }

  void* allocate_scratch(size_t bytes, Stream& stream) override {
    return allocate(bytes, Placement::Private, stream);
  }

  // Outside stream order the host is the only actor: set-up memory is host memory.
  void* allocate_now(size_t bytes) override { return host_allocate(bytes); }
  void free_now(void* data) override { std::free(data); }
  void* allocate_pinned(size_t bytes) override { return host_allocate(bytes); }
  void free_pinned(void* data) override { std::free(data); }
  void copy_now(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memmove(dst, src, bytes);
  }
  bool is_device_pointer(const void*) const override { return false; }
  void make_current() override {}

  bool query(Event& event) override {
    cpu::CpuEvent& e = as_cpu(event);
    if (!e.fence) return true;
    if (!e.fence->wait_for(std::chrono::milliseconds(0))) return false;
    if (auto error = e.fence->error()) throw *error;
    if (checker_) checker_->merge(StreamChecker::kHost, e.clock);
    return true;
  }
  std::unique_ptr<Stream> adopt_stream(void*, const std::string& name) override {
    return create_stream(name);
  }

  void fill_bytes(void* dst, unsigned char value, size_t bytes, Stream& s) override {
    run(s, {{dst, bytes, Access::Write}}, "fill_bytes", [=] { std::memset(dst, value, bytes); });
  }

  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    run(s, {{src, bytes, Access::Read}, {dst, bytes, Access::Write}}, "copy",
        [=] { std::memmove(dst, src, bytes); });
  }

  void fill_zero(void* dst, size_t bytes, Stream& s) override {
    run(s, {{dst, bytes, Access::Write}}, "fill_zero", [=] { std::memset(dst, 0, bytes); });
  }

  void scale(DType dtype, void* x, float factor, size_t count, Stream& s) override {
    run(s, {{x, bytes_of(dtype, count), Access::Write}}, "scale",
        [=] { kernels::scale(dtype, x, factor, count); });
  }

  void cast(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t count,
            Stream& s) override {
    run(s,
        {{src, bytes_of(src_dtype, count), Access::Read},
         {dst, bytes_of(dst_dtype, count), Access::Write}},
        "cast", [=] { kernels::cast(src_dtype, src, dst_dtype, dst, count); });
  }

  void sum_blocks(DType src_dtype, const void* src, size_t blocks, size_t stride, float factor,
                  DType dst_dtype, void* dst, size_t count, bool accumulate, Stream& s) override {
    if (blocks == 0 || count == 0) return;
    run(s,
        {{src, bytes_of(src_dtype, (blocks - 1) * stride + count), Access::Read},
         {dst, bytes_of(dst_dtype, count), Access::Write}},
        "sum_blocks", [=] {
          kernels::sum_blocks(src_dtype, src, blocks, stride, factor, dst_dtype, dst, count,
                              accumulate);
        });
  }

  void sum_of_squares(DType dtype, const void* x, size_t count, double* out, Stream& s) override {
    run(s, {{x, bytes_of(dtype, count), Access::Read}, {out, sizeof(double), Access::Write}},
        "sum_of_squares", [=] { *out = kernels::sum_of_squares(dtype, x, count); });
  }

  void narrow_to_float(const double* src, float* dst, size_t count, Stream& s) override {
    run(s,
        {{src, count * sizeof(double), Access::Read},
         {dst, count * sizeof(float), Access::Write}},
        "narrow_to_float", [=] {
          for (size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
        });
  }

  void zero_grad_factor(kernels::DeviceSumOfSquares sum_sq, double loss_scale, double max_norm,
                        float* factor, Stream& s) override {
    const size_t sum_bytes = sum_sq.fp32 ? sizeof(float) : sizeof(double);
    run(s, {{sum_sq.data, sum_bytes, Access::Read}, {factor, sizeof(float), Access::Write}},
        "zero_grad_factor", [=] {
          const double sum = sum_sq.fp32 ? double(*static_cast<const float*>(sum_sq.data))
                                         : *static_cast<const double*>(sum_sq.data);
          *factor = kernels::zero_grad_factor(sum, loss_scale, max_norm);
        });
  }

  void adam_step(const kernels::AdamHyper& h, int64_t step, kernels::GradFactor grad_factor,
                 float* param, const float* grad, float* m, float* v, size_t count,
                 kernels::ParamCopy copy, Stream& s) override {
    run_step(s, "adam_step", grad_factor, grad, param, {m, v}, count, copy, [=] {
      kernels::adam_step(h, step, grad_factor.applied(), param, grad, m, v, count, copy);
    });
  }

  void lion_step(const kernels::LionHyper& h, kernels::GradFactor grad_factor, float* param,
                 const float* grad, float* m, size_t count, kernels::ParamCopy copy,
                 Stream& s) override {
    run_step(s, "lion_step", grad_factor, grad, param, {m}, count, copy,
             [=] { kernels::lion_step(h, grad_factor.applied(), param, grad, m, count, copy); });
  }

  void sgd_step(const kernels::SgdHyper& h, int64_t step, kernels::GradFactor grad_factor,
                float* param, const float* grad, float* momentum, size_t count,
                kernels::ParamCopy copy, Stream& s) override {
    run_step(s, "sgd_step", grad_factor, grad, param, {momentum}, count, copy, [=] {
      kernels::sgd_step(h, step, grad_factor.applied(), param, grad, momentum, count, copy);
    });
  }

  void adagrad_step(const kernels::AdagradHyper& h, kernels::GradFactor grad_factor, float* param,
                    const float* grad, float* sum_sq, size_t count, kernels::ParamCopy copy,
                    Stream& s) override {
    run_step(s, "adagrad_step", grad_factor, grad, param, {sum_sq}, count, copy, [=] {
      kernels::adagrad_step(h, grad_factor.applied(), param, grad, sum_sq, count, copy);
    });
  }

  void lamb_prepare(const kernels::LambHyper& h, int64_t step, kernels::GradFactor grad_factor,
                    const float* param, const float* grad, float* m, float* v, size_t count,
                    double* norms_sq, Stream& s) override {
    const size_t b = count * sizeof(float);
    run(s,
        {{grad, b, Access::Read},
         {param, b, Access::Read},
         {m, b, Access::Write},
         {v, b, Access::Write},
         {norms_sq, 2 * sizeof(double), Access::Write},
         factor_read(grad_factor)},
        "lamb_prepare", [=] {
          const size_t offsets[2] = {0, count};
          kernels::lamb_prepare(h, step, grad_factor.applied(), param, grad, m, v, offsets, 1,
                                norms_sq);
        });
  }

  void lamb_apply(const kernels::LambHyper& h, int64_t step, float* param, const float* m,
                  const float* v, size_t count, const double* norms_sq, kernels::ParamCopy copy,
                  Stream& s) override {
    const size_t b = count * sizeof(float);
    run(s,
        {{m, b, Access::Read},
         {v, b, Access::Read},
         {norms_sq, 2 * sizeof(double), Access::Read},
         {param, b, Access::Write},
         copied(copy, count)},
        "lamb_apply", [=] {
          const size_t offsets[2] = {0, count};
          kernels::lamb_apply(h, step, param, m, v, offsets, 1, norms_sq, nullptr, copy);
        });
  }

  void host_task(Stream& s, std::function<void()> fn, std::span<const Touch> touches,
                 const char* what) override {
    CpuStream& stream = as_cpu(s);
    if (checker_) checker_->access(stream.actor(), touches, what);
    stream.enqueue(std::move(fn));
  }

  void host_access(std::span<const Touch> touches, const char* what) override {
    if (checker_) checker_->access(StreamChecker::kHost, touches, what);
  }

  void declare(Stream& stream, std::span<const Touch> touches, const char* what) override {
    if (checker_) checker_->access(as_cpu(stream).actor(), touches, what);
  }

 private:
  // `bytes` zero-filled, 64-byte aligned bytes of host memory.
  static void* host_allocate(size_t bytes) {
    void* p = std::aligned_alloc(64, std::max<size_t>((bytes + 63) / 64 * 64, 64));
    if (!p) {
      throw Error(ErrorKind::OutOfMemory,
                  "out of host memory allocating " + std::to_string(bytes) +
                      " bytes; use a higher ZeRO stage, more ranks, or a smaller model/batch");
    }
    std::memset(p, 0, bytes);
    return p;
  }
  static Touch copied(const kernels::ParamCopy& copy, size_t count) {
    return {copy.data, copy.data ? bytes_of(copy.dtype, count) : 0, Access::Write};
  }
  void run(Stream& s, std::span<const Touch> touches, const char* what, std::function<void()> work) {
    CpuStream& stream = as_cpu(s);
    if (checker_) checker_->access(stream.actor(), touches, what);
    stream.enqueue(std::move(work));
  }
  void run(Stream& s, std::initializer_list<Touch> touches, const char* what,
           std::function<void()> work) {
    run(s, std::span<const Touch>(touches.begin(), touches.size()), what, std::move(work));
  }
  // The device gradient factor an optimizer step reads, if any.
  static Touch factor_read(const kernels::GradFactor& factor) {
    return {factor.device, factor.device ? sizeof(float) : 0, Access::Read};
  }
  // A fused optimizer step: it reads the gradient and writes the parameters, each state (a null
  // one, SGD's momentum without momentum, is nothing) and the low-precision copy.
  void run_step(Stream& s, const char* what, const kernels::GradFactor& factor, const float* grad,
                float* param, std::initializer_list<float*> states, size_t count,
                const kernels::ParamCopy& copy, std::function<void()> work) {
    const size_t b = count * sizeof(float);
    std::array<Touch, 6> touches{Touch{grad, b, Access::Read}, Touch{param, b, Access::Write},
                                 factor_read(factor)};
    size_t n = 3;
    for (float* state : states) touches.at(n++) = {state, state ? b : 0, Access::Write};
    touches.at(n++) = copied(copy, count);
    run(s, std::span<const Touch>(touches.data(), n), what, std::move(work));
  }

  CpuDeviceOptions options_;
  std::unique_ptr<StreamChecker> checker_;  // declared before the streams: they use it to the end
  std::unique_ptr<CpuStream> compute_;
  uint64_t streams_ = 0;
};

}  // namespace

CpuDeviceOptions cpu_device_options_from_environment(CpuDeviceOptions base) {
  if (const long check = env_number("DSX_STREAM_CHECK", -1); check >= 0)
    base.check_order = check != 0;
  base.max_delay_us = static_cast<unsigned>(env_number("DSX_STREAM_DELAY_US", base.max_delay_us));
  return base;
}

std::unique_ptr<Device> make_cpu_device(CpuDeviceOptions options) {
  return std::make_unique<CpuDevice>(std::move(options));
}

}  // namespace dsx::device
