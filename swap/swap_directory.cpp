// A rank's swap scratch directory (see swap_directory.h).
#include "swap/swap_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "dsx/error.h"

namespace dsx::swap {

// Swaps are O_DIRECT; a file system without it (some network and FUSE ones) is refused at once
// instead of failing the first swap with a puzzling EINVAL.
void SwapDirectory::check_direct_io(const std::string& file) const {
  const int fd = ::open(file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const int err = errno;
  throw Error(ErrorKind::Io,
              "nvme_path " + nvme_path_ + ": the swap file " + file +
                  " cannot be opened for direct I/O (O_DIRECT): " + std::strerror(err) +
                  ". Put nvme_path on a local drive's file system (ext4, xfs).");
}

SwapDirectory::SwapDirectory(const std::string& nvme_path, const std::string& what, int rank)
    : nvme_path_(nvme_path),
      path_((std::filesystem::path(nvme_path) / "dsx_swap" / what / ("rank" + std::to_string(rank)))
                .string()) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(nvme_path, ec)) {
    throw Error(ErrorKind::Io,
                "nvme_path " + nvme_path + " is not a directory" +
                    (ec ? " (" + ec.message() + ")" : std::string()) +
                    ": create it on the NVMe drive, or fix nvme_path in the ds_config");
  }
  fs::remove_all(path_, ec);  // a previous run's scratch
  fs::create_directories(path_, ec);
  if (ec) {
    throw Error(ErrorKind::Io, "nvme_path " + nvme_path + ": cannot create the swap directory " +
                                   path_ + ": " + ec.message() +
                                   ". Make nvme_path writable for this user.");
  }
}

SwapDirectory::~SwapDirectory() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: it is scratch
}

std::string SwapDirectory::create_file(const std::string& name, size_t bytes) {
  const std::string file = (std::filesystem::path(path_) / name).string();
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    throw Error(ErrorKind::Io, "nvme_path " + nvme_path_ + ": cannot create the swap file " + file +
                                   ": " + std::strerror(err));
  }
  const int rc = bytes ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
  ::close(fd);
  check_direct_io(file);
  if (rc != 0) {
    throw Error(ErrorKind::Io,
                "nvme_path " + nvme_path_ + ": cannot reserve " + std::to_string(bytes) +
                    " bytes for the swap file " + file + ": " + std::strerror(rc) +
                    (rc == ENOSPC || rc == EFBIG
                         ? ". The drive is too small for this run's swap: free space there, or "
                           "point nvme_path at a larger drive."
                         : "."));
  }
  return file;
}

}  // namespace dsx::swap
