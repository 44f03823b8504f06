// Runs one dsx GPT-2 forward and backward for the transformers reference check
// (hf_reference.py): reads weights (safetensors or llm.c) and a batch (safetensors with I32
// "inputs" and "targets", shape (B, T)); writes logits and loss, the gradients in Hugging Face
// names and layouts, and the weights re-exported by dsx with a config.json.
// usage: gpt2_reference WEIGHTS BATCH OUT_DIR
#include <cstring>
#include <iostream>

#include "dsx/error.h"
#include "models/gpt2/gpt2_cpu.h"
#include "models/io/gpt2_weights.h"
#include "models/io/safetensors.h"
#include "models/local_params.h"

using namespace dsx::models;

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::cerr << "usage: gpt2_reference WEIGHTS BATCH OUT_DIR\n";
    return 2;
  }
  std::string out_dir = argv[3];
  GPT2Weights w = load_gpt2_weights(argv[1]);
  SafetensorsReader batch(argv[2]);
  const TensorView* x = batch.find("inputs");
  const TensorView* y = batch.find("targets");
  if (!x || !y || x->dtype != "I32" || y->dtype != "I32" || x->shape.size() != 2 || y->shape != x->shape)
    throw dsx::Error(dsx::ErrorKind::Format, "batch file needs I32 tensors inputs and targets of one shape (B, T)");
  const int B = static_cast<int>(x->shape[0]), T = static_cast<int>(x->shape[1]);
  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::memcpy(inputs.data(), x->data, x->bytes);
  std::memcpy(targets.data(), y->data, y->bytes);

  GPT2Cpu<float> model(w.config, B, T);
  LocalParams<float> p(model);
  std::copy(w.params.begin(), w.params.end(), p.params());
  model.forward(inputs.data(), nullptr, B, T, p);
  std::vector<float> logits = model.logits();
  float loss = model.forward(inputs.data(), targets.data(), B, T, p);
  p.zero_grads();
  model.backward(p, p, 1.0f);

  SafetensorsWriter out;
  out.add("logits", "F32", {B, T, w.config.vocab_size}, logits.data(), logits.size() * 4);
  out.add("loss", "F32", {1}, &loss, 4);
  out.write(out_dir + "/dsx_outputs.safetensors");
  write_gpt2_safetensors(out_dir + "/dsx_grads.safetensors", w.config, p.grads());
  write_gpt2_safetensors(out_dir + "/export/model.safetensors", w.config, p.params());
  write_gpt2_hf_config(out_dir + "/export/config.json", w.config);
  std::cout << "dsx loss " << loss << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "gpt2_reference: " << e.what() << "\n";
  return 1;
}
