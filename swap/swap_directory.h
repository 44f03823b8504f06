// The per-run scratch directory one rank swaps into, <nvme_path>/dsx_swap/<what>/rank<R>, and
// its files. Swap files are scratch, never a checkpoint: the directory is emptied when a run
// starts and removed when it ends, and a checkpoint copies the values out through the normal
// checkpoint writer (a checkpoint never points here). Each file's space is reserved when it is
// made (fallocate), so a disk too small fails at start-up with the path named, not mid-step.
// Two jobs must not share an nvme_path: the second empties the first's scratch, and the first
// then stops with its swap file named.
#pragma once

#include <cstddef>
#include <string>

namespace dsx::swap {

class SwapDirectory {
 public:
  // Makes (or empties) the directory; Error(Io) naming nvme_path if it cannot.
  SwapDirectory(const std::string& nvme_path, const std::string& what, int rank);
  ~SwapDirectory();  // removes the directory and its files
  SwapDirectory(const SwapDirectory&) = delete;
  SwapDirectory& operator=(const SwapDirectory&) = delete;

  const std::string& path() const { return path_; }
  // Creates `name` with `bytes` reserved on the disk; returns its path.
  std::string create_file(const std::string& name, size_t bytes);

 private:
  void check_direct_io(const std::string& file) const;

  std::string nvme_path_;
  std::string path_;
};

}  // namespace dsx::swap
