// `dsx export`: a Hugging Face model folder (safetensors with Hugging Face names, config.json, the
// tokenizer files of the folder training started from) from a checkpoint.
#include <iostream>

#include "dsx/error.h"
#include "engine/export.h"
#include "engine/export_lora.h"
#include "tools/cli.h"

namespace dsx::tools {

int run_export(int argc, char** argv) {
  po::options_description options("dsx export");
  options.add_options()
      ("checkpoint", po::value<std::string>(), "the --save directory of dsx train")
      ("tag", po::value<std::string>()->default_value(""), "the tag to export (default: what `latest` names)")
      ("out", po::value<std::string>(), "a folder to write (model.safetensors, config.json, tokenizer files), or a "
       "FILE.safetensors (config.json goes beside it)")
      ("dtype", po::value<std::string>()->default_value("fp32"), "fp32, bf16 or fp16 (fp16: Llama-family models)")
      ("peft", po::value<std::string>(), "a LoRA run's checkpoint: write its adapter as a PEFT folder here "
       "(adapter_config.json, adapter_model.safetensors)")
      ("merged", po::bool_switch(), "a LoRA run's checkpoint: write --out as the base model with the adapters merged "
       "in (PEFT's merge_and_unload)");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  auto args = parse_args(argc, argv, "dsx export CHECKPOINT_DIR --out DIR|FILE.safetensors [--tag T] [--dtype fp32|bf16|fp16] [--merged] | --peft DIR", options,
                         &positional);
  if (args.help) return 0;
  auto& v = args.vars;
  if (v.count("checkpoint") && v.count("peft")) {
    const std::string out = v["peft"].as<std::string>();
    const std::string tag = engine::export_lora_adapter(v["checkpoint"].as<std::string>(), v["tag"].as<std::string>(), out);
    std::cout << "dsx export: " << tag << " -> " << out << " (PEFT adapter: adapter_config.json, adapter_model.safetensors)\n";
    return 0;
  }
  if (!v.count("checkpoint") || !v.count("out")) {
    throw Error(ErrorKind::Usage, "dsx export needs a checkpoint directory and --out FILE (see --help)");
  }
  const std::string dtype_name = v["dtype"].as<std::string>();
  if (dtype_name != "fp32" && dtype_name != "bf16" && dtype_name != "fp16") {
    throw Error(ErrorKind::Usage, "--dtype must be fp32, bf16 or fp16, not '" + dtype_name + "'");
  }
  const auto dtype = dtype_name == "bf16"   ? kernels::DType::BF16
                     : dtype_name == "fp16" ? kernels::DType::F16
                                            : kernels::DType::F32;
  std::string out = v["out"].as<std::string>();
  const std::string suffix = ".safetensors";
  const bool file = out.size() > suffix.size() && out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (!file) out += "/model.safetensors";
  const std::string checkpoint = v["checkpoint"].as<std::string>(), wanted = v["tag"].as<std::string>();
  const bool lora = engine::is_lora_checkpoint(checkpoint, wanted);
  if (lora && !v["merged"].as<bool>())
    throw Error(ErrorKind::Usage, checkpoint + " holds a LoRA run's adapters: export them with --peft DIR, or the "
                                               "base with them merged in with --out DIR --merged");
  if (!lora && v["merged"].as<bool>())
    throw Error(ErrorKind::Usage, "--merged is for LoRA runs' checkpoints; " + checkpoint + " holds a full model");
  const std::string tag = lora ? engine::export_lora_merged(checkpoint, wanted, out, dtype)
                               : engine::export_checkpoint(checkpoint, wanted, out, dtype);
  std::cout << "dsx export: " << tag << " -> " << out << " (" << dtype_name << ", Hugging Face names, config.json beside it)\n";
  return 0;
}

}  // namespace dsx::tools
