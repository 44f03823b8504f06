// Each library is looked up by soname on the loader's path first, then in the CUDA toolkit
// directories ($CUDA_HOME, /usr/local/cuda). Handles are never closed: CUDA libraries do not
// like being unloaded, and the process is short-lived.
#include "tools/report/cuda_libraries.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>

namespace dsx::report {

namespace {

struct Loaded {
  void* handle = nullptr;
  std::string path;
  std::string error;
};

Loaded load(std::initializer_list<const char*> sonames, bool search_toolkit = true) {
  std::vector<std::string> dirs = {""};
  if (search_toolkit) {
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* d = std::getenv(var); d && *d) dirs.push_back(std::string(d) + "/lib64/");
    }
    dirs.push_back("/usr/local/cuda/lib64/");
  }
  Loaded result;
  for (const auto& dir : dirs) {
    for (const char* soname : sonames) {
      std::string candidate = dir + soname;
      if (void* h = dlopen(candidate.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
        result.handle = h;
        result.path = candidate;
        return result;
      }
      if (result.error.empty()) result.error = dlerror();
    }
  }
  return result;
}

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// Where the loader actually found it (a bare soname tells the user little).
std::string resolved_path(void* handle, const char* any_symbol, const std::string& fallback) {
  Dl_info info{};
  if (void* s = dlsym(handle, any_symbol); s && dladdr(s, &info) && info.dli_fname)
    return info.dli_fname;
  return fallback;
}

void fill(LibraryInfo& lib, const Loaded& loaded, const char* probe_symbol) {
  lib.found = loaded.handle != nullptr;
  if (lib.found) {
    lib.path = resolved_path(loaded.handle, probe_symbol, loaded.path);
  } else {
    lib.note = loaded.error;
  }
}

// Asks a loaded library's `int name(int* version)` (0: success) for its version code, and spells
// it with `text`.
void ask_version(LibraryInfo& lib, const Loaded& loaded, const char* name,
                 std::string (*text)(int)) {
  using GetVersion = int (*)(int*);
  int v = 0;
  if (auto f = symbol<GetVersion>(loaded.handle, name); f && f(&v) == 0) {
    lib.version_code = v;
    lib.version = text(v);
  }
}

}  // namespace

std::string cuda_version_text(int code) {
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

std::string nccl_version_text(int code) {
  if (code >= 20900) {
    return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." +
           std::to_string(code % 100);
  }
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 100) + "." +
         std::to_string(code % 100);
}

std::string cudnn_version_text(int code) {
  if (code >= 90000) return nccl_version_text(code);
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 100) + "." +
         std::to_string(code % 100);
}

CudaStack probe_cuda_libraries() {
  CudaStack s;
  s.runtime.name = "CUDA runtime";
  s.driver.name = "CUDA driver";
  s.cublas.name = "cuBLAS";
  s.cudnn.name = "cuDNN";
  s.nccl.name = "NCCL";

  auto cudart = load({"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"});
  fill(s.runtime, cudart, "cudaRuntimeGetVersion");
  if (cudart.handle) ask_version(s.runtime, cudart, "cudaRuntimeGetVersion", cuda_version_text);

  // Never the toolkit's stubs/libcuda.so: only a real driver install answers truthfully.
  auto driver = load({"libcuda.so.1"}, false);
  fill(s.driver, driver, "cuDriverGetVersion");
  if (driver.handle) {
    ask_version(s.driver, driver, "cuDriverGetVersion", cuda_version_text);
  } else {
    s.driver.note = "no NVIDIA driver on this host (" + s.driver.note + ")";
  }

  auto cublas = load({"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"});
  fill(s.cublas, cublas, "cublasGetProperty");
  if (cublas.handle) {
    using GetProperty = int (*)(int, int*);
    int major = 0, minor = 0, patch = 0;
    if (auto f = symbol<GetProperty>(cublas.handle, "cublasGetProperty");
        f && f(0, &major) == 0 && f(1, &minor) == 0 && f(2, &patch) == 0) {
      s.cublas.version_code = major * 10000 + minor * 100 + patch;
      s.cublas.version =
          std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    }
  }

  auto cudnn = load({"libcudnn.so", "libcudnn.so.9", "libcudnn.so.8"});
  fill(s.cudnn, cudnn, "cudnnGetVersion");
  if (cudnn.handle) {
    using GetSize = size_t (*)();
    if (auto f = symbol<GetSize>(cudnn.handle, "cudnnGetVersion")) {
      s.cudnn.version_code = static_cast<int>(f());
      s.cudnn.version = cudnn_version_text(s.cudnn.version_code);
    }
    if (auto f = symbol<GetSize>(cudnn.handle, "cudnnGetCudartVersion")) {
      s.cudnn_cudart_code = static_cast<int>(f());
      s.cudnn.note = "built for CUDA " + cuda_version_text(s.cudnn_cudart_code);
    }
  }

  auto nccl = load({"libnccl.so.2", "libnccl.so"});
  fill(s.nccl, nccl, "ncclGetVersion");
  if (nccl.handle) ask_version(s.nccl, nccl, "ncclGetVersion", nccl_version_text);
  return s;
}

}  // namespace dsx::report
