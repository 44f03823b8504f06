// Environment propagation (ref/launcher.md 4.4).
#include "launcher/env_export.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "dsx/error.h"

extern char** environ;

namespace dsx::launcher {
namespace {

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;  // like os.path.join
  return dir + "/" + name;
}

}  // namespace

std::vector<EnvVar> current_environment() {
  std::vector<EnvVar> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

const std::vector<std::string>& exported_prefixes() {
  static const std::vector<std::string> prefixes = {
      "MLFLOW", "PYTHON", "MV2", "UCX",
      // Nebula / AzureML
      "DLTS_JOB_ID", "DLTS_NUM_WORKER", "NEBULA", "AML_RUN_ID", "AZUREML", "FC_TASKROLE_NAME",
      "FC_TASK_INDEX", "MASTER_HOST", "LOCAL_HOST",
      // CUDA accelerator
      "NCCL",
      // dsx: libfabric settings and dsx's own
      "FI_", "DSX_",
  };
  return prefixes;
}

std::vector<EnvVar> parse_env_file(const std::string& text, const std::string& path) {
  std::vector<EnvVar> vars;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string s = strip(line);
    if (s.empty() || s.front() == '#') continue;
    if (s.rfind("export ", 0) == 0) s = strip(s.substr(7));
    auto eq = s.find('=');
    std::string key = eq == std::string::npos ? "" : strip(s.substr(0, eq));
    if (key.empty()) {
      throw Error(ErrorKind::Launch, path + ":" + std::to_string(line_no) + ": '" + s +
                                         "' is not KEY=VALUE; fix or remove the line");
    }
    vars.emplace_back(key, strip(s.substr(eq + 1)));
  }
  return vars;
}

std::string env_value(const std::vector<EnvVar>& environment, const std::string& name) {
  for (const auto& [k, v] : environment)
    if (k == name) return v;
  return "";
}

void env_set(std::vector<EnvVar>& environment, const std::string& name, const std::string* value) {
  auto it = std::find_if(environment.begin(), environment.end(), [&](const EnvVar& e) { return e.first == name; });
  if (!value) {
    if (it != environment.end()) environment.erase(it);
  } else if (it != environment.end()) {
    it->second = *value;
  } else {
    environment.emplace_back(name, *value);
  }
}

std::vector<EnvVar> collect_exports(const std::vector<EnvVar>& environment, const std::string& cwd,
                                    const std::string& home) {
  std::vector<EnvVar> env = environment;
  std::string pythonpath = env_value(env, "PYTHONPATH");
  std::string new_path = pythonpath.empty() ? cwd : cwd + ":" + pythonpath;
  env_set(env, "PYTHONPATH", &new_path);

  bool aisc = !env_value(env, "AISC_JOB_NAME").empty();
  std::vector<EnvVar> exports;
  for (const auto& [name, value] : env) {
    if (aisc && (name == "NCCL_IB_HCA" || name == "UCX_NET_DEVICES")) continue;
    for (const auto& prefix : exported_prefixes()) {
      if (name.rfind(prefix, 0) == 0) {
        exports.emplace_back(name, value);
        break;
      }
    }
  }

  std::string file_name = env_value(environment, "DS_ENV_FILE");
  if (file_name.empty()) file_name = ".deepspeed_env";
  std::vector<std::string> files = {join_path(home, file_name)};
  if (join_path(cwd, file_name) != files[0]) files.push_back(join_path(cwd, file_name));
  for (const auto& path : files) {
    if (!is_file(path)) continue;
    std::ifstream in(path);
    if (!in) throw Error(ErrorKind::Io, path + " exists but cannot be read: check its permissions");
    std::ostringstream text;
    text << in.rdbuf();
    for (const auto& [k, v] : parse_env_file(text.str(), path)) env_set(exports, k, &v);
  }
  return exports;
}

}  // namespace dsx::launcher
