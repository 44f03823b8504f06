// `dsx export`: consolidated safetensors (fp32 or bf16, Hugging Face names) from a checkpoint.
#include <iostream>

#include "dsx/error.h"
#include "engine/export.h"
#include "tools/cli.h"

namespace dsx::tools {

int run_export(int argc, char** argv) {
  po::options_description options("dsx export");
  options.add_options()
      ("checkpoint", po::value<std::string>(), "the --save directory of dsx train")
      ("tag", po::value<std::string>()->default_value(""), "the tag to export (default: what `latest` names)")
      ("out", po::value<std::string>(), "the safetensors file to write (config.json goes beside it)")
      ("dtype", po::value<std::string>()->default_value("fp32"), "fp32 or bf16");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  auto args = parse_args(argc, argv, "dsx export CHECKPOINT_DIR --out FILE [--tag T] [--dtype fp32|bf16]", options,
                         &positional);
  if (args.help) return 0;
  auto& v = args.vars;
  if (!v.count("checkpoint") || !v.count("out")) {
    throw Error(ErrorKind::Usage, "dsx export needs a checkpoint directory and --out FILE (see --help)");
  }
  const std::string dtype_name = v["dtype"].as<std::string>();
  if (dtype_name != "fp32" && dtype_name != "bf16") {
    throw Error(ErrorKind::Usage, "--dtype must be fp32 or bf16, not '" + dtype_name + "'");
  }
  const auto dtype = dtype_name == "bf16" ? kernels::DType::BF16 : kernels::DType::F32;
  const std::string out = v["out"].as<std::string>();
  const std::string tag = engine::export_checkpoint(v["checkpoint"].as<std::string>(), v["tag"].as<std::string>(), out, dtype);
  std::cout << "dsx export: " << tag << " -> " << out << " (" << dtype_name << ", Hugging Face GPT-2 names)\n";
  return 0;
}

}  // namespace dsx::tools
