// The write probe of a directory (see writable_directory.h).
#include "engine/writable_directory.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "dsx/error.h"

namespace dsx::engine {

void require_writable_directory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string probe = dir + "/.dsx-write-test-" + std::to_string(::getpid());
  if (!ec) {
    std::ofstream out(probe, std::ios::binary);
    out << "dsx";
    out.flush();
    if (!out) ec = std::error_code(errno ? errno : EIO, std::generic_category());
  }
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
  if (ec) {
    throw Error(ErrorKind::Io, flag + " " + dir + ": cannot write there (" + ec.message() +
                                   "); choose a directory this user can create and write, on a disk with room");
  }
}

}  // namespace dsx::engine
