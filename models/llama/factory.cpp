// Llama-family construction by device and dtype (see factory.h).
#include "models/llama/factory.h"

#include "models/build_model.h"
#include "models/llama/llama_cpu.h"
#ifdef DSX_HAVE_CUDA
#include "models/llama/llama_cuda.h"
#endif

namespace dsx::models {

std::unique_ptr<Model> make_llama(const LlamaConfig& config, const LlamaOptions& o) {
#ifdef DSX_HAVE_CUDA
  if (o.cuda) return make_cuda_model<LlamaCuda>(config, o);
#endif
  return make_cpu_model<LlamaCpu>("Llama", config, o);
}

}  // namespace dsx::models
