// A model family's named presets (gpt2_preset, llama_preset): one looked up by name, with the
// valid names in the message when it is unknown, and the list of names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dsx/error.h"

namespace dsx::models {

// `family` names it in the message ("GPT-2", "Llama"). Throws Error(Config) for an unknown name.
template <class Config>
const Config& find_preset(const std::map<std::string, Config>& table, const std::string& name,
                          const char* family) {
  auto it = table.find(name);
  if (it != table.end()) return it->second;
  std::string names;
  for (const auto& [n, c] : table) names += (names.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::Config,
              std::string("unknown ") + family + " preset '" + name + "'; choose one of: " + names);
}

template <class Config>
std::vector<std::string> preset_names(const std::map<std::string, Config>& table) {
  std::vector<std::string> names;
  for (const auto& [n, c] : table) names.push_back(n);
  return names;
}

}  // namespace dsx::models
