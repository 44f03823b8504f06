// Asked once by tests/gpu/run.sh before anything is built or run: which CUDA runtime this is,
// which CUDA version the driver supports, and how many devices CUDA sees. One line of
// key=value pairs; exit 0 only when at least one device is usable. Deliberately no kernels, so
// it runs whatever the GPU's architecture.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int runtime = 0, driver = 0, devices = 0;
  cudaRuntimeGetVersion(&runtime);  // the toolkit this was built with (cudart is static)
  cudaDriverGetVersion(&driver);    // 0 when no driver is loaded
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) devices = 0;
  std::printf("runtime=%d driver=%d devices=%d", runtime, driver, devices);
  if (err != cudaSuccess) std::printf(" error=%s (%s)", cudaGetErrorName(err), cudaGetErrorString(err));
  std::printf("\n");
  return err == cudaSuccess && devices > 0 ? 0 : 1;
}
