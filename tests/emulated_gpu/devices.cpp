// The emulated machine: how many GPUs, which of them this process sees, their size, and the
// per-thread state of the runtime (current device, last error).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/emulated_gpu/runtime.h"

namespace dsx::emu {
namespace {

long long env_number(const char* name, long long fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  switch (end && *end ? *end : 0) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
  }
  return v > 0 ? v : fallback;
}

// The physical GPUs this process sees, in visible order: CUDA_VISIBLE_DEVICES's entries that name
// an existing GPU, up to the first that does not (as CUDA reads it).
const std::vector<int>& visible() {
  static const std::vector<int>* v = [] {
    auto* out = new std::vector<int>;
    const int machine = int(env_number("DSX_EMULATED_GPUS", 1));
    const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!list) {
      for (int i = 0; i < machine; ++i) out->push_back(i);
      return out;
    }
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
      char* end = nullptr;
      long id = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end || id < 0 || id >= machine) break;
      out->push_back(int(id));
    }
    return out;
  }();
  return *v;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

}  // namespace

int device_count() { return int(visible().size()); }
int physical_gpu(int device) {
  return device >= 0 && device < device_count() ? visible()[size_t(device)] : -1;
}
size_t device_memory_bytes() {
  return size_t(env_number("DSX_EMULATED_GPU_MEMORY", 8ll << 30));
}
int multiprocessor_count() { return int(env_number("DSX_EMULATED_SMS", 2)); }

int current_device() { return t_device; }
void set_current_device(int device) { t_device = device; }

cudaError_t set_last_error(cudaError_t error) {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}
cudaError_t take_last_error() {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t peek_last_error() { return t_last_error; }

void say(const std::string& message) {
  std::fprintf(stderr, "dsx emulated GPU: %s\n", message.c_str());
  std::fflush(stderr);
}

}  // namespace dsx::emu
