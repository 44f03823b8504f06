// For check_llama_with_hf.sh (not run by ctest): reads a Hugging Face Llama-family folder with
// dsx's reader, runs LlamaCpu<float> forward and backward on the batch of a JSON file
// ({"inputs": [[...]], "targets": [[...]]}, targets < 0 ignored) and writes the loss, the logits
// and each parameter's gradient norm as JSON. With an export folder, also writes the weights back
// there with write_llama_hf_folder (fp32), for transformers to load.
//
//   llama_dump MODEL_DIR BATCH_JSON OUT_JSON [EXPORT_DIR]
#include <rapidjson/document.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "models/io/hf_folder.h"
#include "models/llama/llama_cpu.h"
#include "models/local_params.h"
#include "tests/models/json_token_rows.h"

using namespace dsx::models;
using dsx::test::rows_of;

namespace {

void write_result(const std::string& path, float loss, const std::vector<float>& logits,
                  const std::vector<ParamSpec>& specs, const float* grads) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw dsx::Error(dsx::ErrorKind::Io, "cannot write '" + path + "'");
  std::fprintf(f, "{\"loss\": %.9g,\n\"logits\": [", loss);
  for (size_t i = 0; i < logits.size(); ++i) std::fprintf(f, "%s%.9g", i ? "," : "", logits[i]);
  std::fprintf(f, "],\n\"grad_norms\": {");
  for (size_t k = 0; k < specs.size(); ++k) {
    double sq = 0;
    for (size_t i = 0; i < specs[k].numel; ++i)
      sq += double(grads[specs[k].offset + i]) * grads[specs[k].offset + i];
    std::fprintf(f, "%s\n\"%s\": %.9g", k ? "," : "", specs[k].name.c_str(), std::sqrt(sq));
  }
  std::fprintf(f, "}}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: llama_dump MODEL_DIR BATCH_JSON OUT_JSON [EXPORT_DIR]\n");
    return 2;
  }
  try {
    const LlamaWeights w = read_llama_hf_folder(argv[1]);
    std::ifstream in(argv[2]);
    rapidjson::Document batch;
    batch.Parse(std::string(std::istreambuf_iterator<char>(in), {}).c_str());
    if (batch.HasParseError() || !batch.HasMember("inputs") || !batch.HasMember("targets"))
      throw dsx::Error(dsx::ErrorKind::Format,
                       std::string("'") + argv[2] + "' needs inputs and targets");
    const std::vector<int32_t> inputs = rows_of(batch["inputs"]),
                               targets = rows_of(batch["targets"]);
    const int B = static_cast<int>(batch["inputs"].Size()), T = static_cast<int>(inputs.size()) / B;
    LlamaCpu<float> model(w.config, B, T);
    LocalParams<float> lp(model);
    std::copy(w.params.begin(), w.params.end(), lp.params());
    const float loss = model.forward(inputs.data(), targets.data(), B, T, lp);
    const std::vector<float> logits = model.logits();  // backward reuses their memory
    lp.zero_grads();
    model.backward(lp, lp, 1.0f);
    write_result(argv[3], loss, logits, model.params(), lp.grads());
    if (argc == 5) {
      HfWriteOptions o;
      o.tokenizer_from = argv[1];  // generation_config.json and any tokenizer files go along
      write_llama_hf_folder(argv[4], w.config, w.params.data(), o);
    }
  } catch (const dsx::Error& e) {
    std::fprintf(stderr, "llama_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
