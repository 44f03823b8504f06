// Device memory a kernel family works in (cuBLASLt's workspace, cuDNN's), allocated by its owner
// and handed in: kernels/ never allocates, because device/ is the one home of the CUDA runtime
// and kernels/ may not depend on it (docs/architecture.md). The owner - a model, which holds a
// device::Device - allocates through device/ and frees after the family's last use.
// C++17: included by .cu files.
#pragma once

#include <cstddef>
#include <functional>

namespace dsx::kernels::cuda {

// `bytes` of device memory at `data`; the family may overwrite all of it.
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// For a family whose need grows with the shapes it meets (cuDNN's graphs): called with the bytes
// it needs now, more than the workspace it was last given, and returns one of at least that size
// that work enqueued next on the family's stream may use. The family never touches the previous
// workspace again; the owner frees it ordered after the work already enqueued (in stream order on
// that stream, or after a wait). Throws (dsx::Error) when there is no room.
using WorkspaceGrow = std::function<Workspace(size_t bytes)>;

}  // namespace dsx::kernels::cuda
