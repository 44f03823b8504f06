// Atomic file writes for render.
#include "cloud/render_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dsx/error.h"

namespace dsx::cloud {

void write_file_atomically(const std::string& path, const std::string& text, unsigned mode) {
  auto fail = [&](const char* what) {
    throw Error(ErrorKind::Io, "cannot " + std::string(what) + " " + path + ": " +
                                   std::strerror(errno) +
                                   " (check the --out directory and free space)");
  };
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    errno = ec.value();
    fail("create the directory of");
  }
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) fail("create");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = saved;
      fail("write");
    }
    done += size_t(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    fail("sync");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail("rename into");
  }
}

std::string replace_placeholder(std::string text, const std::string& name,
                                const std::string& value) {
  const std::string marker = "{{" + name + "}}";
  for (size_t pos = text.find(marker); pos != std::string::npos;
       pos = text.find(marker, pos + value.size())) {
    text.replace(pos, marker.size(), value);
  }
  return text;
}

}  // namespace dsx::cloud
