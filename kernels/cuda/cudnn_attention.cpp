// Causal GQA attention through cuDNN's fused flash-attention graphs (see cudnn_attention.h), built
// with cudnn-frontend's graph API: one forward and one backward graph per shape, built on first
// use and kept. The frontend is pinned and fetched by tools/cudnn_frontend.sh.
#include "kernels/cuda/cudnn_attention.h"

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dsx/error.h"

namespace dsx::kernels::cuda {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids: the keys of the variant pack that binds device pointers at execution.
enum : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

std::string describe(const AttentionShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH) +
         " KV=" + std::to_string(s.KV) + " D=" + std::to_string(s.D) + " " + dtype_name(s.dtype);
}

// The reason a frontend step failed, or "" when it succeeded.
std::string failure(fe::error_t status) {
  return status.is_good() ? std::string() : status.get_message();
}

// (B, heads, T, D) with the strides of a contiguous (B, T, heads, D) array: the projections'
// layout, so q, k, v, out and their gradients need no transpose.
fe::graph::Tensor_attributes bthd(const char* name, int64_t uid, const AttentionShape& s,
                                  int heads) {
  const int64_t T = s.T, H = heads, D = s.D;
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.B, H, T, D})
      .set_stride({T * H * D, D, H * D, 1});
}

void set_bthd(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid,
              const AttentionShape& s, int heads) {
  const int64_t T = s.T, H = heads, D = s.D;
  t->set_output(true).set_uid(uid).set_dim({s.B, H, T, D}).set_stride({T * H * D, D, H * D, 1});
}

std::shared_ptr<fe::graph::Graph> new_graph(const AttentionShape& s) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(s.dtype == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// Stats: fp32 (B, NH, T, 1), contiguous, i.e. the header's (B, NH, T).
void set_stats(const std::shared_ptr<fe::graph::Tensor_attributes>& t, const AttentionShape& s) {
  const int64_t T = s.T, H = s.NH;
  t->set_uid(kStats)
      .set_dim({s.B, H, T, 1})
      .set_stride({H * T, T, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

std::shared_ptr<fe::graph::Graph> forward_graph(const AttentionShape& s) {
  auto graph = new_graph(s);
  auto q = graph->tensor(bthd("q", kQ, s, s.NH));
  auto k = graph->tensor(bthd("k", kK, s, s.KV));  // KV < NH heads: grouped-query attention
  auto v = graph->tensor(bthd("v", kV, s, s.KV));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("dsx_attention_forward")
                     .set_generate_stats(true)  // training: backward reads the log-sum-exp
                     .set_causal_mask(true)
                     .set_attn_scale(s.scale);
  auto [o, stats] = graph->sdpa(q, k, v, options);
  set_bthd(o, kO, s, s.NH);
  stats->set_output(true);
  set_stats(stats, s);
  return graph;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const AttentionShape& s) {
  auto graph = new_graph(s);
  auto q = graph->tensor(bthd("q", kQ, s, s.NH));
  auto k = graph->tensor(bthd("k", kK, s, s.KV));
  auto v = graph->tensor(bthd("v", kV, s, s.KV));
  auto o = graph->tensor(bthd("o", kO, s, s.NH));
  auto dout = graph->tensor(bthd("dO", kDO, s, s.NH));
  auto stats = graph->tensor(fe::graph::Tensor_attributes().set_name("stats"));
  set_stats(stats, s);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("dsx_attention_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(s.scale);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dout, stats, options);
  set_bthd(dq, kDQ, s, s.NH);
  set_bthd(dk, kDK, s, s.KV);  // summed over the query heads of each group by cuDNN
  set_bthd(dv, kDV, s, s.KV);
  return graph;
}

}  // namespace

struct CudnnAttention::Impl {
  struct Entry {
    AttentionShape shape;
    std::shared_ptr<fe::graph::Graph> forward, backward;  // both null when unsupported
    std::string why;                                      // why not, when unsupported
  };

  cudaStream_t stream;
  WorkspaceGrow grow;              // the owner's memory
  cudnnHandle_t handle = nullptr;  // created on first use: a model in fp32 never needs cuDNN
  std::string handle_error;        // cudnnCreate's failure, once it failed
  Workspace workspace;
  std::vector<Entry> cache;  // a handful of shapes per model: a linear search is enough

  Impl(cudaStream_t s, WorkspaceGrow g) : stream(s), grow(std::move(g)) {}
  ~Impl() {
    if (handle) cudnnDestroy(handle);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Creates the handle once; false, with the reason in handle_error, when cuDNN cannot.
  bool make_handle() {
    if (handle) return true;
    if (!handle_error.empty()) return false;
    cudnnStatus_t rc = cudnnCreate(&handle);
    if (rc == CUDNN_STATUS_SUCCESS) {
      rc = cudnnSetStream(handle, stream);
      if (rc != CUDNN_STATUS_SUCCESS) {
        handle_error = std::string("cudnnSetStream failed: ") + cudnnGetErrorString(rc);
        cudnnDestroy(handle);
        handle = nullptr;
        return false;
      }
      return true;
    }
    handle = nullptr;
    handle_error = std::string("cudnnCreate failed: ") + cudnnGetErrorString(rc) + " (cuDNN " +
                   std::to_string(cudnnGetVersion()) + ")";
    return false;
  }

  // Validates, lowers to cuDNN's backend, asks the heuristics for engines, checks that one takes
  // the graph and builds its plan; the first failing step and cuDNN's message, or "".
  std::string build(fe::graph::Graph& graph, const char* which) {
    std::string why;
    try {
      const auto step = [&](const char* name, fe::error_t status) {
        if (why.empty() && !status.is_good())
          why = std::string(which) + " graph: " + name + ": " + failure(status);
        return why.empty();
      };
      step("validate", graph.validate()) &&
          step("build_operation_graph", graph.build_operation_graph(handle)) &&
          step("create_execution_plans",
               graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})) &&
          step("check_support", graph.check_support(handle)) &&
          step("build_plans", graph.build_plans(handle));
    } catch (const std::exception& e) {  // the frontend's legacy parts throw cudnnException
      why = std::string(which) + " graph: " + e.what();
    }
    return why;
  }

  // Room for the larger of the current workspace and `bytes`, from the owner (who frees the old
  // one after the work already enqueued that uses it).
  void reserve(int64_t bytes) {
    const size_t need = static_cast<size_t>(bytes);
    if (need <= workspace.bytes) return;
    if (!grow)
      throw Error(ErrorKind::Internal, "cuDNN fused attention needs a " + std::to_string(need) +
                                           "-byte workspace, but its owner gave no way to grow one");
    const Workspace given = grow(need);
    if (given.bytes < need || !given.data)
      throw Error(ErrorKind::Internal, "cuDNN fused attention asked its owner for a " +
                                           std::to_string(need) + "-byte workspace and got " +
                                           std::to_string(given.bytes) + " bytes");
    workspace = given;
  }

  Entry& entry(const AttentionShape& s) {
    for (Entry& e : cache)
      if (e.shape == s) return e;
    Entry e{s, nullptr, nullptr, ""};
    if (s.dtype != DType::BF16 && s.dtype != DType::F16) {
      e.why =
          std::string("cuDNN's fused attention takes 16-bit inputs, not ") + dtype_name(s.dtype);
    } else if (s.B <= 0 || s.T <= 0 || s.NH <= 0 || s.KV <= 0 || s.NH % s.KV != 0) {
      e.why = "the head counts or sizes are not positive, or KV does not divide NH";
    } else if (s.D % 8 != 0 || s.D > 256) {
      e.why = "head size " + std::to_string(s.D) +
              ": cuDNN's fused attention takes multiples of 8 up to 256";
    } else if (!make_handle()) {
      e.why = handle_error;
    } else {
      // Training needs both directions: a shape is supported only when both build.
      std::shared_ptr<fe::graph::Graph> forward, backward;
      try {
        forward = forward_graph(s);
        backward = backward_graph(s);
      } catch (const std::exception& error) {
        e.why = std::string("describing the graphs: ") + error.what();
      }
      if (e.why.empty()) e.why = build(*forward, "forward");
      if (e.why.empty()) e.why = build(*backward, "backward");
      if (e.why.empty()) {
        int64_t forward_bytes = 0, backward_bytes = 0;
        std::string size_error = failure(forward->get_workspace_size(forward_bytes));
        if (size_error.empty()) size_error = failure(backward->get_workspace_size(backward_bytes));
        if (!size_error.empty()) e.why = "get_workspace_size: " + size_error;
        if (e.why.empty()) {
          reserve(std::max(forward_bytes, backward_bytes));
          e.forward = std::move(forward);
          e.backward = std::move(backward);
        }
      }
    }
    cache.push_back(std::move(e));
    return cache.back();
  }

  Entry& usable(const AttentionShape& s, const char* call) {
    Entry& e = entry(s);
    if (!e.forward)
      throw Error(ErrorKind::Unsupported, std::string("cuDNN fused attention ") + call + " (" +
                                              describe(s) + "): not supported: " + e.why +
                                              " (ask supported() first)");
    return e;
  }

  void execute(const fe::graph::Graph& graph, std::unordered_map<int64_t, void*>& pack,
               const AttentionShape& s, const char* call) {
    std::string why;
    try {
      why = failure(graph.execute(handle, pack, workspace.data));
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty())
      throw Error(ErrorKind::Internal, std::string("cuDNN fused attention ") + call + " (" +
                                           describe(s) + "): execute failed: " + why);
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream, WorkspaceGrow grow)
    : impl_(std::make_unique<Impl>(stream, std::move(grow))) {}
CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::supported(const AttentionShape& shape) {
  return impl_->entry(shape).forward != nullptr;
}

void CudnnAttention::forward(const AttentionShape& shape, const void* q, const void* k,
                             const void* v, void* out, float* stats) {
  Impl::Entry& e = impl_->usable(shape, "forward");
  // The frontend's variant pack takes void*; cuDNN only reads the inputs.
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)},
                                             {kK, const_cast<void*>(k)},
                                             {kV, const_cast<void*>(v)},
                                             {kO, out},
                                             {kStats, stats}};
  impl_->execute(*e.forward, pack, shape, "forward");
}

void CudnnAttention::backward(const AttentionShape& shape, const void* q, const void* k,
                              const void* v, const void* out, const void* dout, const float* stats,
                              void* dq, void* dk, void* dv) {
  Impl::Entry& e = impl_->usable(shape, "backward");
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)},
                                             {kK, const_cast<void*>(k)},
                                             {kV, const_cast<void*>(v)},
                                             {kO, const_cast<void*>(out)},
                                             {kDO, const_cast<void*>(dout)},
                                             {kStats, const_cast<float*>(stats)},
                                             {kDQ, dq},
                                             {kDK, dk},
                                             {kDV, dv}};
  impl_->execute(*e.backward, pack, shape, "backward");
}

}  // namespace dsx::kernels::cuda
