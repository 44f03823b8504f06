// make_lora_model (see lora_factory.h).
#include "models/lora/lora_factory.h"

#include "dsx/error.h"
#include "models/lora/frozen_weights.h"
#include "models/lora/lora_gpt2.h"
#ifdef DSX_HAVE_CUDA
#include "models/lora/lora_gpt2_cuda.h"
#include "models/lora/lora_llama_cuda.h"
#endif

namespace dsx::models {

#ifdef DSX_HAVE_CUDA
namespace {

std::unique_ptr<LoraModel> make_lora_gpt2_on_gpu(const GPT2Config& c,
                                                 const std::vector<float>& base,
                                                 const LoraConfig& lora,
                                                 const ModelBuildOptions& o) {
  auto stream = static_cast<cudaStream_t>(o.stream);
  const bool ckpt = o.activation_checkpointing;
  if (o.dtype == kernels::DType::F32)
    return std::make_unique<LoraGpt2Cuda<float>>(c, lora, o.max_batch, o.max_seq, ckpt, base,
                                                 stream);
  if (o.dtype == kernels::DType::BF16)
    return std::make_unique<LoraGpt2Cuda<__nv_bfloat16>>(c, lora, o.max_batch, o.max_seq, ckpt,
                                                         base, stream);
  return std::make_unique<LoraGpt2Cuda<__half>>(c, lora, o.max_batch, o.max_seq, ckpt, base,
                                                stream);
}

}  // namespace
#endif

std::unique_ptr<LoraModel> make_lora_model(const ModelShape& shape, std::vector<float> base, const LoraConfig& lora,
                                           const ModelBuildOptions& options) {
  if (shape.family == ModelShape::Family::GPT2) {
    if (options.cuda)
      throw Error(ErrorKind::Internal, "a GPT-2 LoRA model on the GPU is make_lora_model_on_gpu's");
    auto model = std::make_unique<LoraGpt2>(
        shape.gpt2, lora, options.max_batch, options.max_seq, options.activation_checkpointing,
        std::make_unique<DenseFrozenWeights>(gpt2_param_specs(shape.gpt2), std::move(base)));
    model->set_bf16_gemms(options.cpu_bf16_gemms);
    return model;
  }
  return make_lora_model(shape, std::make_unique<DenseFrozenWeights>(llama_param_specs(shape.llama), std::move(base)),
                         lora, options);
}

std::unique_ptr<LoraLlama> make_lora_model(const ModelShape& shape, std::unique_ptr<ParamAccess> frozen,
                                           const LoraConfig& lora, const ModelBuildOptions& options) {
  if (shape.family != ModelShape::Family::Llama)
    throw Error(ErrorKind::Unsupported, "this LoRA base (partitioned or quantised) is for the Llama family (Llama, "
                                        "Mistral, Qwen2), not " + shape.family_name() +
                                            "; GPT-2 trains LoRA over a base every rank holds whole (ZeRO 0-2, or 3 "
                                            "with its adapters partitioned)");
  if (options.cuda)
    throw Error(ErrorKind::Unsupported,
                "a LoRA model over a base that is not on the GPU is CPU-only (QLoRA's NF4 base, ZeRO "
                "stage 3's partitioned base); add --device cpu (and bf16/fp16 \"enabled\": false)");
  auto model = std::make_unique<LoraLlama>(shape.llama, lora, options.max_batch, options.max_seq,
                                           options.activation_checkpointing, std::move(frozen));
  model->set_bf16_gemms(options.cpu_bf16_gemms);
  return model;
}

std::unique_ptr<LoraModel> make_lora_model_on_gpu(const ModelShape& shape, const std::vector<float>& base,
                                                  const LoraConfig& lora, const ModelBuildOptions& o,
                                                  std::unique_ptr<ParamAccess> frozen) {
  if (shape.family != ModelShape::Family::Llama && shape.family != ModelShape::Family::GPT2)
    throw Error(ErrorKind::Unsupported,
                "LoRA on the GPU trains the Llama family (Llama, Mistral, Qwen2) and GPT-2, not " +
                    shape.family_name() + "; add --device cpu");
  if (shape.family == ModelShape::Family::GPT2 && (frozen || !lora.modules_to_save.empty() || lora.bias != "none"))
    throw Error(ErrorKind::Unsupported,
                "GPT-2 LoRA on the GPU trains the adapters at ZeRO stage 0-2 so far: ZeRO stage 3, "
                "modules_to_save and bias \"all\"/\"lora_only\" train GPT-2 on the CPU (add --device cpu), "
                "or on the GPU with a Llama-family model");
#ifdef DSX_HAVE_CUDA
  if (shape.family == ModelShape::Family::GPT2)
    return make_lora_gpt2_on_gpu(shape.gpt2, base, lora, o);
  auto stream = static_cast<cudaStream_t>(o.stream);
  const bool ckpt = o.activation_checkpointing;
  if (o.dtype == kernels::DType::F32)
    return std::make_unique<LoraLlamaCuda<float>>(shape.llama, lora, o.max_batch, o.max_seq, ckpt, base, stream,
                                                  std::move(frozen));
  if (o.dtype == kernels::DType::BF16)
    return std::make_unique<LoraLlamaCuda<__nv_bfloat16>>(shape.llama, lora, o.max_batch, o.max_seq, ckpt, base,
                                                          stream, std::move(frozen));
  return std::make_unique<LoraLlamaCuda<__half>>(shape.llama, lora, o.max_batch, o.max_seq, ckpt, base, stream,
                                                 std::move(frozen));
#else
  (void)base, (void)lora, (void)o, (void)frozen;
  throw Error(ErrorKind::Unsupported, "this dsx was built without CUDA, so LoRA trains on the CPU only; rebuild "
                                      "with -DDSX_CUDA=ON, or add --device cpu");
#endif
}

}  // namespace dsx::models
