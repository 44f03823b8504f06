// The optimizers' hyper-parameter defaults, as DeepSpeed's optimizers take them when
// "optimizer.params" leaves a key out (FusedAdam, FusedLamb, FusedLion, torch's Adagrad). Written
// once here because two rooms that may not use each other start from them: the ds_config reader
// (config::OptimizerParams) and the kernels' hyper-parameter structs (kernels/optimizer_math.h).
#pragma once

namespace dsx::optimizer_defaults {

// Adam, AdamW and Lamb; Lion shares the rate and the betas.
inline constexpr double kLr = 1e-3;
inline constexpr double kBeta1 = 0.9;
inline constexpr double kBeta2 = 0.999;
inline constexpr double kEps = 1e-8;

// Lamb's clamp of the trust ratio.
inline constexpr double kLambMaxCoeff = 10.0;
inline constexpr double kLambMinCoeff = 0.01;

// torch.optim.Adagrad's, where they differ from the fused optimizers'.
inline constexpr double kAdagradLr = 1e-2;
inline constexpr double kAdagradEps = 1e-10;

}  // namespace dsx::optimizer_defaults
