// File and directory names of DeepSpeed's checkpoint layout, and the `latest` file.
#include "checkpoint/layout.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "dsx/error.h"
#include "checkpoint/durable_file.h"

namespace dsx::checkpoint {

std::string default_tag(int64_t global_step) { return "global_step" + std::to_string(global_step); }

void check_tag(const std::string& tag) {
  auto refuse = [&](const std::string& why) {
    throw Error(ErrorKind::Usage, "checkpoint tag \"" + tag + "\" " + why +
                                      ": use a plain directory name such as global_step100");
  };
  if (tag.empty()) refuse("is empty");
  if (tag.size() > 200) refuse("is longer than 200 bytes");
  if (tag.find('/') != std::string::npos || tag == "." || tag == "..")
    refuse("is a path (a '/', or '.' or '..'); a tag names one directory inside the save directory");
  if (tag[0] == '.') refuse("starts with '.' (hidden names are dsx's staging directories)");
  if (tag == "latest") refuse("would collide with the `latest` file");
  for (unsigned char c : tag) {
    if (c < 0x20 || c == 0x7f) refuse("contains a control character");
  }
}

std::string model_states_file_name() { return "mp_rank_00_model_states.safetensors"; }

std::string zero_optim_states_file_name(int rank, bool bf16) {
  return std::string(bf16 ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(rank) +
         "_mp_rank_00_optim_states.safetensors";
}

std::string zero_model_states_file_name(int rank) {
  return "zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_model_states.safetensors";
}

std::string tag_directory(const std::string& save_dir, const std::string& tag) {
  return save_dir + "/" + tag;
}

std::string staging_directory(const std::string& save_dir, const std::string& tag) {
  return save_dir + "/." + tag + ".saving";
}

std::string latest_file(const std::string& save_dir) { return save_dir + "/latest"; }

std::string read_latest_tag(const std::string& save_dir) {
  const std::string path = latest_file(save_dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      throw Error(ErrorKind::Io, "no checkpoint to load in " + save_dir + ": " + path +
                                     " does not exist (no save has completed there); pass the "
                                     "directory a save wrote to, or name a tag explicitly");
    throw_io_error("could not read", path, errno);
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string tag = text.str();
  const char* space = " \t\r\n";
  tag.erase(0, tag.find_first_not_of(space) == std::string::npos ? tag.size()
                                                                 : tag.find_first_not_of(space));
  tag.erase(tag.find_last_not_of(space) + 1);
  if (tag.empty())
    throw Error(ErrorKind::Format, path +
                                       " is empty: it should hold the tag of the newest "
                                       "checkpoint; name a tag explicitly to load");
  return tag;
}

}  // namespace dsx::checkpoint
