// What the checkpoint protocol promises when things go wrong for real: a process SIGKILLed at
// random moments of saving (many times) always leaves `latest` loadable and verified; a full disk
// (a tiny tmpfs), the file-size limit (RLIMIT_FSIZE) and a directory without write permission give
// errors that name the file and say what to do, and leave the previous checkpoint intact.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "checkpoint_test_util.h"
#include "dsx/error.h"
#include "tests/engine/test_files.h"
#include "tests/expect_contains.h"

using namespace dsx::checkpoint;
using namespace dsx::test;  // test_files.h: read_all, load_and_check, save_test_checkpoint, TempDir

namespace {

// Runs `body` in a forked child and returns what it wrote to the pipe and its exit status. The
// child never returns into GoogleTest.
template <typename Fn>
std::pair<std::string, int> in_child(Fn&& body) {
  int fds[2];
  if (pipe(fds) != 0) return {"pipe failed", -1};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string message;
    int code = 0;
    try {
      code = body(message);
    } catch (const dsx::Error& e) {
      message = std::string("dsx::Error(") + dsx::to_string(e.kind()) + "): " + e.what();
      code = 10;
    } catch (...) {
      message = "unexpected exception";
      code = 11;
    }
    if (!message.empty() && write(fds[1], message.data(), message.size()) < 0) code = 12;
    _exit(code);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

}  // namespace

// A process killed while it replaces `latest` (the last step of a commit, the second phase of a
// node-local one) leaves its temporary file `latest.tmp<pid>`; the next commit removes it, as it
// removes a killed save's staging directory.
TEST(CheckpointCrash, KillWhileMovingLatestLeavesNothingAfterTheNextCommit) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(1), 1, 1, 64);
  auto [message, code] = in_child([&](std::string&) {
    DurableFile latest(latest_file(tmp.path()));
    latest.write(default_tag(2));
    kill(getpid(), SIGKILL);  // before the rename: the temporary file stays
    return 0;
  });
  ASSERT_EQ(code, 128 + SIGKILL) << message;
  auto leftovers = [&] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(tmp.path()))
      if (entry.path().filename().string().starts_with("latest.tmp")) names.push_back(entry.path().filename());
    return names;
  };
  ASSERT_EQ(leftovers().size(), 1u) << "the kill left no temporary file; the test no longer reproduces it";
  EXPECT_EQ(load_and_check(tmp.path()), 1);
  save_test_checkpoint(tmp.path(), default_tag(3), 1, 3, 64);
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
  EXPECT_EQ(load_and_check(tmp.path()), 3);
}

TEST(CheckpointCrash, SigkillAtRandomMomentsNeverBreaksLatest) {
  TempDir tmp;
  constexpr int kWorld = 2;
  constexpr size_t kNumel = 8192;  // 32 KiB per rank: a save takes a few fsyncs
  save_test_checkpoint(tmp.path(), default_tag(0), kWorld, 0, kNumel);
  std::mt19937 rng(20261130);
  int64_t last_step = 0;
  int kills_inside_a_save = 0;
  const int kKills = 40;
  for (int k = 0; k < kKills; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Save forever, alternating new tags with one tag saved over and over (the swap path).
      try {
        for (int64_t step = last_step + 1;; ++step)
          save_test_checkpoint(tmp.path(), step % 2 ? std::string("rolling") : default_tag(step),
                               kWorld, step, kNumel);
      } catch (...) {
        _exit(3);
      }
    }
    usleep(static_cast<useconds_t>(2000 + rng() % 120000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the saving child stopped by itself (status " << status << ")";

    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(tmp.path(), ec))
      if (e.path().filename().string().ends_with(".saving")) {
        ++kills_inside_a_save;
        break;
      }
    int64_t step = -1;
    try {
      step = load_and_check(tmp.path());
    } catch (const dsx::Error& e) {
      FAIL() << "after kill " << k << " latest is not loadable: " << e.what();
    }
    ASSERT_GE(step, last_step) << "after kill " << k
                               << ": latest went back in time or a value is wrong";
    last_step = step;
  }
  EXPECT_GT(last_step, 0) << "no save ever completed between kills";
  EXPECT_GT(kills_inside_a_save, kKills / 4) << "the kills did not land inside saves";
}

TEST(CheckpointDiskFull, FullTmpfsNamesTheFileAndKeepsThePreviousCheckpoint) {
  TempDir mount_point;
  if (mount("tmpfs", mount_point.path().c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno)
                 << "; RLIMIT_FSIZE test covers the error path";
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount_point.path()};

  save_test_checkpoint(mount_point.path(), default_tag(1), 2, 1, 4096);  // ~40 KiB: fits
  std::string msg;
  try {
    save_test_checkpoint(mount_point.path(), default_tag(2), 2, 2, 64 * 1024);  // 256 KiB per rank
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::Io);
    msg = e.what();
  }
  EXPECT_CONTAINS(msg, mount_point.path() + "/.global_step2.saving/");
  EXPECT_CONTAINS(msg, "No space left on device");
  EXPECT_CONTAINS(msg, "the disk is full");
  EXPECT_EQ(read_all(mount_point.path() + "/latest"), "global_step1");
  EXPECT_EQ(load_and_check(mount_point.path()), 1);
  // No temporary file survives the failed write.
  for (auto& e : std::filesystem::recursive_directory_iterator(mount_point.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(CheckpointDiskFull, FileSizeLimitNamesTheFileAndKeepsThePreviousCheckpoint) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(1), 2, 1, 1024);
  auto [msg, code] = in_child([&](std::string&) {
    signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit limit{64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &limit);
    save_test_checkpoint(tmp.path(), default_tag(2), 2, 2, 64 * 1024);
    return 0;
  });
  EXPECT_EQ(code, 10) << msg;
  EXPECT_CONTAINS(msg, "dsx::Error(io)");
  EXPECT_CONTAINS(
      msg, tmp.path() + "/.global_step2.saving/zero_pp_rank_0_mp_rank_00_optim_states.safetensors");
  EXPECT_CONTAINS(msg, "File too large");
  EXPECT_CONTAINS(msg, "ulimit -f");
  EXPECT_EQ(read_all(tmp.file("latest")), "global_step1");
  EXPECT_EQ(load_and_check(tmp.path()), 1);
}

TEST(CheckpointDiskFull, UnwritableDirectoryNamesItAndSaysWhatToDo) {
  TempDir tmp;
  save_test_checkpoint(tmp.path(), default_tag(1), 1, 1, 64);
  // As root: others may enter but not write, and the child becomes "nobody". Otherwise the
  // owner (us) loses write permission.
  const bool root = geteuid() == 0;
  ASSERT_EQ(chmod(tmp.path().c_str(), root ? 0755 : 0555), 0);
  auto [msg, code] = in_child([&](std::string&) {
    if (root && (setgid(65534) != 0 || setuid(65534) != 0)) return 20;  // drop root
    save_test_checkpoint(tmp.path(), default_tag(2), 1, 2, 64);
    return 0;
  });
  chmod(tmp.path().c_str(), 0755);  // let TempDir clean up
  ASSERT_NE(code, 20) << "could not drop root privileges";
  EXPECT_EQ(code, 10) << msg;
  EXPECT_CONTAINS(msg, tmp.path() + "/.global_step2.saving");
  EXPECT_CONTAINS(msg, "Permission denied");
  EXPECT_CONTAINS(msg, "make the directory writable");
  EXPECT_EQ(load_and_check(tmp.path()), 1);
}
