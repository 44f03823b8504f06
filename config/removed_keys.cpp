// Keys DeepSpeed (0.19.8) refuses because their feature was removed: a leftover key would
// silently do nothing, so DeepSpeed raises an error, and dsx does the same with the reason.
#include "config/readers.h"

namespace dsx::config::detail {

namespace {

const std::vector<std::pair<std::string, std::string>> kRemovedTopLevel = {
    {"nebula", "Nebula checkpointing was removed"},
    {"compression_training", "the compression library was removed"},
    {"amp", "Apex AMP was removed; use \"fp16\", \"bf16\" or \"torch_autocast\""},
    {"quantize_training", "Mixture-of-Quantization was removed"},
    {"sparse_gradients", "sparse compression of dense embedding gradients was removed"},
    {"eigenvalue", "eigenvalue-based MoQ was removed"},
    {"sparse_attention", "Sparse Attention was removed"},
    {"elasticity",
     "elastic training was removed; give the batch sizes directly. Under `dsx torchrun "
     "--nnodes MIN:MAX` dsx keeps train_batch_size and recomputes gradient_accumulation_steps "
     "for each world size (docs/launch.md, \"When a rank or a node fails\")"},
    {"graph_harvesting", "graph harvesting was removed"},
    {"curriculum_learning", "the legacy top-level curriculum_learning was removed; use "
                            "data_efficiency.data_sampling.curriculum_learning"},
    {"progressive_layer_drop", "Progressive Layer Dropping was removed"}};
const std::vector<std::pair<std::string, std::string>> kRemovedZero = {
    {"mics_shard_size", "MiCS sharding was removed"},
    {"mics_hierarchical_params_gather", "MiCS sharding was removed"},
    {"zeropp_loco_param", "LoCo-ZeRO++ was removed"}};

void reject(ReadContext& ctx, BlockReader& block, const json::Value* object,
            const std::vector<std::pair<std::string, std::string>>& removed) {
  if (!object) return;
  for (const auto& [key, why] : removed) {
    if (const json::Member* m = block.take(key.c_str())) {
      ctx.error(block.path(key.c_str()), m->key_pos,
                "'" + key + "' is no longer supported by DeepSpeed (" + why +
                    "); DeepSpeed refuses configs that still contain it. Remove it.");
    }
  }
}

}  // namespace

void reject_removed_top_level_keys(ReadContext& ctx, BlockReader& top, const json::Value* root) {
  reject(ctx, top, root, kRemovedTopLevel);
}

void reject_removed_zero_keys(ReadContext& ctx, BlockReader& zero, const json::Value* object) {
  reject(ctx, zero, object, kRemovedZero);
}

}  // namespace dsx::config::detail
