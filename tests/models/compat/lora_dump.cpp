// For check_lora_with_peft.sh (not run by ctest): the logits of a Hugging Face Llama-family or
// GPT-2 folder with a PEFT adapter folder applied, as dsx computes them (on the CPU), for
// the rows of a JSON batch ({"inputs": [[...]]}), written as JSON {"logits": [...]}.
//
//   lora_dump BASE_DIR ADAPTER_DIR BATCH_JSON OUT_JSON
#include <rapidjson/document.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dsx/error.h"
#include "models/model_source.h"
#include "models/local_params.h"
#include "models/lora/lora_factory.h"
#include "models/lora/peft_adapter.h"
#include "tests/models/json_token_rows.h"

using namespace dsx::models;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: lora_dump BASE_DIR ADAPTER_DIR BATCH_JSON OUT_JSON\n");
    return 2;
  }
  try {
    ModelSource base = load_model_source(argv[1]);  // a Llama-family or GPT-2 folder
    std::ifstream in(argv[3]);
    rapidjson::Document batch;
    batch.Parse(std::string(std::istreambuf_iterator<char>(in), {}).c_str());
    if (batch.HasParseError() || !batch.HasMember("inputs"))
      throw dsx::Error(dsx::ErrorKind::Format, std::string("'") + argv[3] + "' needs inputs");
    const std::vector<int32_t> inputs = dsx::test::rows_of(batch["inputs"]);
    const int B = static_cast<int>(batch["inputs"].Size()), T = static_cast<int>(inputs.size()) / B;
    ModelBuildOptions options;
    options.max_batch = B, options.max_seq = T;
    const std::string adapter = argv[2];
    auto model = make_lora_model(base.shape, std::move(base.initial), read_peft_adapter_config(adapter + "/adapter_config.json"),
                                 options);
    LocalParams<float> params(*model);
    read_peft_adapter_weights(adapter, model->params(), params.params());
    model->forward(inputs.data(), nullptr, B, T, params);
    const std::vector<float> logits = model->logits();
    std::FILE* f = std::fopen(argv[4], "w");
    if (!f) throw dsx::Error(dsx::ErrorKind::Io, std::string("cannot write '") + argv[4] + "'");
    std::fprintf(f, "{\"logits\": [");
    for (size_t i = 0; i < logits.size(); ++i) std::fprintf(f, "%s%.9g", i ? "," : "", logits[i]);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  } catch (const dsx::Error& e) {
    std::fprintf(stderr, "lora_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
