// Streams and events of the emulated GPU (the runtime's internals; cudart.cpp maps the C API onto
// them). A stream is a worker thread that runs its queue in order. The legacy default stream
// keeps CUDA's implicit ordering with the device's blocking streams; events mark a point in a
// stream's queue and really wait for it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

namespace dsx::emu {

struct StreamImpl;

cudaError_t create_stream(cudaStream_t* out, unsigned flags);
cudaError_t destroy_stream(cudaStream_t stream);
cudaError_t query_stream(cudaStream_t stream);  // counted as a host sync once per point polled
cudaError_t synchronize_device();               // every stream of the current device

cudaError_t create_event(cudaEvent_t* out, unsigned flags);
cudaError_t destroy_event(cudaEvent_t event);
cudaError_t record_event(cudaEvent_t event, cudaStream_t stream);
cudaError_t query_event(cudaEvent_t event);
cudaError_t synchronize_event(cudaEvent_t event);
cudaError_t stream_wait_event(cudaStream_t stream, cudaEvent_t event);
cudaError_t event_elapsed(float* ms, cudaEvent_t start, cudaEvent_t end);

void count_host_sync();

}  // namespace dsx::emu
