// A real OpenSSH server for multi-node launcher tests: Debian's sshd listening on 127.0.0.1 and
// 127.0.0.2 at a free port, with a throwaway host key and user key in a temp dir and its own
// sshd_config (key login only), plus the matching client config. Started per test and stopped
// by pid, with every session it spawned, even when the test fails.
#pragma once

#include <netinet/in.h>
#include <arpa/inet.h>
#include <pwd.h>
#include <sys/socket.h>

#include "launcher/process.h"
#include "tests/launcher/launch_test_util.h"
#include "tests/tools/run_command.h"

namespace dsx::test {

inline bool can_connect(const char* addr, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, addr, &a.sin_addr);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

class SshdFixture : public testing::Test {
 protected:
  ScratchDir dir;
  int port = free_port();
  std::string client_config;  // pass with ssh -F
  std::unique_ptr<Background> sshd;

  void SetUp() override {
    for (const char* tool : {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"}) {
      if (!exists(tool)) GTEST_SKIP() << tool << " is not installed (Debian packages openssh-server, openssh-client)";
    }
    for (const char* key : {"hostkey", "userkey"}) {
      auto r = run_command("ssh-keygen -q -t ed25519 -N '' -f " + (dir / key));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    std::filesystem::copy_file(dir / "userkey.pub", dir / "authorized_keys");
    std::ofstream(dir / "sshd_config") << "Port " << port << "\nListenAddress 127.0.0.1\nListenAddress 127.0.0.2\n"
                                       << "HostKey " << (dir / "hostkey") << "\nPidFile " << (dir / "sshd.pid") << "\n"
                                       << "AuthorizedKeysFile " << (dir / "authorized_keys") << "\n"
                                       << "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                                       << "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPrintMotd no\n"
                                       << "AcceptEnv LANG LC_*\n";  // as Debian's and Ubuntu's sshd do
    client_config = dir / "ssh_config";
    std::ofstream(client_config) << "Host *\n  Port " << port << "\n  User " << ::getpwuid(::geteuid())->pw_name
                                 << "\n  IdentityFile " << (dir / "userkey") << "\n  IdentitiesOnly yes\n"
                                 << "  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n";
    // sshd refuses to start without its privilege separation directory.
    if (::geteuid() == 0) std::filesystem::create_directories("/run/sshd");
    sshd = std::make_unique<Background>(std::vector<std::string>{"/usr/sbin/sshd", "-D", "-e", "-f", dir / "sshd_config"},
                                        std::vector<std::string>{}, dir / "sshd.log");
    bool up = wait_for([&] { return can_connect("127.0.0.1", port) && can_connect("127.0.0.2", port); }, 10);
    ASSERT_TRUE(up) << "sshd did not start on 127.0.0.1/127.0.0.2:" << port << ":\n" << read_text(dir / "sshd.log");
  }

  void TearDown() override {
    if (sshd && sshd->pid() > 0) dsx::launcher::signal_tree(sshd->pid(), SIGKILL);
    sshd.reset();
  }

  std::string write_hostfile(const std::string& text) {
    std::ofstream(dir / "hostfile") << text;
    return dir / "hostfile";
  }
};

}  // namespace dsx::test
