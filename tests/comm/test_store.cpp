// The rendezvous store as its users meet it: ranks set/get/add/wait on keys through a real TCP
// server on 127.0.0.1, and every failure (timeout, busy port, unreachable master, wrong secret,
// wrong world size, duplicate or missing rank, a vanished rank) is an error that says what and
// where - never a hang.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "comm/rendezvous.h"
#include "comm/store/store.h"
#include "comm/store/store_server.h"
#include "dsx/error.h"
#include "tests/comm/free_port.h"
#include "tests/comm/rank_processes.h"

namespace dsx::comm {
namespace {

using namespace std::chrono_literals;
using test::free_port;

struct Job {
  explicit Job(int world, std::string secret = "") : server("127.0.0.1", 0, world, secret), world_size(world) {}
  std::unique_ptr<Store> rank(int r, std::string secret = "", int world = -1) {
    return std::make_unique<Store>(StoreAddress{"127.0.0.1", server.port()},
                                   StoreIdentity{r, world < 0 ? world_size : world, std::move(secret)}, 2s);
  }
  StoreServer server;
  int world_size;
};

std::string error_of(const std::function<void()>& f, ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "no error";
}

TEST(Store, SetGetAddCheckRemove) {
  Job job(2);
  auto a = job.rank(0), b = job.rank(1);
  std::string binary("\0\x01\xff id", 6);
  a->set("nccl/uid", binary);
  EXPECT_EQ(b->get("nccl/uid", 1s), binary);
  EXPECT_EQ(a->add("count", 5), 5);
  EXPECT_EQ(b->add("count", -2), 3);
  EXPECT_EQ(a->get("count", 1s), "3");
  EXPECT_TRUE(b->check("count"));
  EXPECT_FALSE(b->check("nothing"));
  EXPECT_EQ(a->try_get("nothing"), std::nullopt);
  EXPECT_TRUE(a->remove("count"));
  EXPECT_FALSE(b->check("count"));
  ErrorKind kind{};
  std::string msg = error_of([&] { a->add("nccl/uid", 1); }, &kind);
  EXPECT_NE(msg.find("not a counter"), std::string::npos) << msg;
  EXPECT_EQ(b->get("nccl/uid", 1s), binary);  // the connection survives a refused request
}

TEST(Store, GetWaitsForAKeySetLater) {
  Job job(2);
  auto a = job.rank(0), b = job.rank(1);
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    a->set("late", "here");
  });
  auto start = Clock::now();
  EXPECT_EQ(b->get("late", 10s), "here");
  EXPECT_GE(Clock::now() - start, 90ms);
  setter.join();
  b->wait({"late"}, 1s);
}

TEST(Store, GetTimesOutNamingTheKeyAndStaysUsable) {
  Job job(1);
  auto a = job.rank(0);
  auto start = Clock::now();
  ErrorKind kind{};
  std::string msg = error_of([&] { a->get("never", 300ms); }, &kind);
  auto waited = Clock::now() - start;
  EXPECT_EQ(kind, ErrorKind::Timeout);
  EXPECT_NE(msg.find("'never'"), std::string::npos) << msg;
  EXPECT_GE(waited, 290ms);
  EXPECT_LT(waited, 5s);
  a->set("after", "ok");
  EXPECT_EQ(a->get("after", 1s), "ok");
  msg = error_of([&] { a->wait({"after", "never"}, 200ms); }, &kind);
  EXPECT_EQ(kind, ErrorKind::Timeout);
}

TEST(Store, PortInUseNamesTheOwner) {
  StoreServer first("127.0.0.1", 0, 1, "");
  std::string msg = error_of([&] { StoreServer second("127.0.0.1", first.port(), 1, ""); });
  EXPECT_NE(msg.find("address already in use"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pid " + std::to_string(getpid())), std::string::npos) << msg;
  EXPECT_NE(msg.find("MASTER_PORT"), std::string::npos) << msg;
}

TEST(Store, UnreachableMasterTimesOutWithAdvice) {
  uint16_t port = free_port();
  ErrorKind kind{};
  auto start = Clock::now();
  std::string msg =
      error_of([&] { Store s(StoreAddress{"127.0.0.1", port}, StoreIdentity{1, 2, ""}, 300ms); }, &kind);
  EXPECT_EQ(kind, ErrorKind::Timeout);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_NE(msg.find("cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Connection refused"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MASTER_ADDR"), std::string::npos) << msg;
}

TEST(Store, SecretKeepsOutWhoeverDoesNotKnowIt) {
  Job job(2, "s3cret");
  auto good = job.rank(0, "s3cret");
  good->set("k", "v");
  std::string msg = error_of([&] { job.rank(1, "guess"); });
  EXPECT_NE(msg.find("wrong or missing shared secret"), std::string::npos) << msg;
  msg = error_of([&] { job.rank(1, ""); });
  EXPECT_NE(msg.find("requires a shared secret"), std::string::npos) << msg;
  EXPECT_EQ(job.rank(1, "s3cret")->get("k", 1s), "v");

  Job open(1);
  msg = error_of([&] { open.rank(0, "s3cret"); });
  EXPECT_NE(msg.find("started without one"), std::string::npos) << msg;
}

// A plain TCP connection to the store, as a stranger on the network makes one (no join).
struct RawConnection {
  int fd = -1;
  explicit RawConnection(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "connect failed";
    timeval tv{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConnection() { ::close(fd); }
  // True when the server closed the connection (reads end) before the 3 s receive timeout.
  bool closed_by_server() {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
};

// Before a connection has joined it may send only a small frame: a stranger announcing 256 MiB
// is cut off at once instead of making rank 0 hold it.
TEST(Store, AStrangersHugeFrameIsRefusedBeforeItJoins) {
  Job job(1, "s3cret");
  RawConnection stranger(job.server.port());
  const uint32_t len = (256u << 20) - 1;
  ASSERT_EQ(::send(stranger.fd, &len, 4, MSG_NOSIGNAL), 4);
  const std::string filler(65536, 'x');
  (void)::send(stranger.fd, filler.data(), filler.size(), MSG_NOSIGNAL);
  EXPECT_TRUE(stranger.closed_by_server());
  EXPECT_EQ(job.rank(0, "s3cret")->add("alive", 1), 1);  // the job's own rank is unaffected
}

// A stranger that streams without pause is cut off after its first oversized frame header, not
// after the server has drained (and held) all it sends: six such streams once held 1.8 GB of
// rank 0 and kept a rank from joining for 15 s.
TEST(Store, AStreamingStrangerIsCutOffBeforeTheServerBuffersIt) {
  Job job(1, "s3cret");
  std::vector<std::unique_ptr<RawConnection>> strangers;
  std::vector<std::thread> streams;
  std::vector<size_t> sent(4, 0);
  for (size_t i = 0; i < sent.size(); ++i) {
    strangers.push_back(std::make_unique<RawConnection>(job.server.port()));
    streams.emplace_back([fd = strangers.back()->fd, &total = sent[i]] {
      const std::string stream(1 << 20, '\xff');  // the first 4 bytes announce a 4 GiB frame
      for (ssize_t n; total < (size_t{64} << 20) && (n = ::send(fd, stream.data(), stream.size(), MSG_NOSIGNAL)) > 0;)
        total += static_cast<size_t>(n);
    });
  }
  const std::string joined = error_of([&] { EXPECT_EQ(job.rank(0, "s3cret")->add("alive", 1), 1); });
  for (auto& t : streams) t.join();
  EXPECT_EQ(joined, "no error");  // the job's rank joined within its 2 s timeout
  // What a stranger got into the socket before its sends failed: loopback buffers hold a few
  // MiB; the server itself took one read.
  for (size_t total : sent) EXPECT_LT(total, size_t{32} << 20);
}

// A connection that does not join is dropped after the join timeout, and a crowd of idle ones
// cannot keep the job's ranks out: past the cap the oldest pending connection goes.
TEST(Store, IdleConnectionsAreDroppedAndCannotCrowdOutRanks) {
  StoreServerLimits limits;
  limits.join_timeout = 300ms;
  StoreServer server("127.0.0.1", 0, 2, "s3cret", limits);
  {
    RawConnection idle(server.port());
    EXPECT_TRUE(idle.closed_by_server()) << "an unjoined connection outlived the join timeout";
  }
  limits.join_timeout = 60s;
  limits.pending_connections = 16;
  StoreServer crowded("127.0.0.1", 0, 2, "s3cret", limits);
  std::vector<std::unique_ptr<RawConnection>> crowd;
  for (int i = 0; i < 100; ++i) crowd.push_back(std::make_unique<RawConnection>(crowded.port()));
  Store rank(StoreAddress{"127.0.0.1", crowded.port()}, StoreIdentity{0, 2, "s3cret"}, 2s);
  rank.set("k", "v");
  EXPECT_EQ(rank.get("k", 1s), "v");
  EXPECT_TRUE(crowd.front()->closed_by_server()) << "the oldest idle connection is the one dropped";
}

TEST(Store, WorldSizeMismatchAndDuplicateRankAreRefused) {
  Job job(4);
  std::string msg = error_of([&] { job.rank(1, "", 3); });
  EXPECT_NE(msg.find("world-size mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WORLD_SIZE=3"), std::string::npos) << msg;
  auto first = job.rank(2);
  msg = error_of([&] { job.rank(2); });
  EXPECT_NE(msg.find("duplicate rank: rank 2"), std::string::npos) << msg;
  msg = error_of([&] { job.rank(7); });
  EXPECT_NE(msg.find("outside the world"), std::string::npos) << msg;
}

TEST(Store, ARankThatVanishesIsPublished) {
  uint16_t port = free_port();
  // Rank 1 joins from a child process and dies without saying goodbye.
  StoreServer server("127.0.0.1", port, 2, "");
  test::RankProcesses child(1, [&](int) {
    auto* leaked = new Store(StoreAddress{"127.0.0.1", port}, StoreIdentity{1, 2, ""}, 2s);
    (void)leaked;
    ::_exit(0);
  });
  auto codes = child.wait(10s);
  ASSERT_EQ(codes[0], 0);
  Store rank0(StoreAddress{"127.0.0.1", port}, StoreIdentity{0, 2, ""}, 2s);
  EXPECT_EQ(rank0.get(store_protocol::kDeadRanksKey, 5s), "1");
}

// A failing rank 0 keeps its store up while other ranks are connected, and no longer.
TEST(Store, WaitForRanksToLeaveEndsWhenTheLastRankHasGone) {
  Job job(3);
  EXPECT_TRUE(job.server.wait_for_ranks_to_leave(Clock::now()));  // nobody joined yet
  auto rank1 = job.rank(1);
  auto rank2 = job.rank(2);
  EXPECT_FALSE(job.server.wait_for_ranks_to_leave(Clock::now() + 50ms));
  rank1.reset();  // a goodbye
  EXPECT_FALSE(job.server.wait_for_ranks_to_leave(Clock::now() + 50ms));
  std::thread vanish([&] {
    std::this_thread::sleep_for(100ms);
    rank2.reset();
  });
  auto start = Clock::now();
  EXPECT_TRUE(job.server.wait_for_ranks_to_leave(Clock::now() + 10s));
  EXPECT_LT(Clock::now() - start, 5s);
  vanish.join();
}

TEST(Rendezvous, NamesTheRanksThatNeverArrived) {
  uint16_t port = free_port();
  RankEnv env{0, 3, 0, {"127.0.0.1", port}};
  std::string msg;
  std::thread rank1([&] {
    RankEnv e = env;
    e.rank = 1;
    error_of([&] { Rendezvous r(e, 400ms, ""); });
  });
  ErrorKind kind{};
  msg = error_of([&] { Rendezvous r(env, 400ms, ""); }, &kind);
  rank1.join();
  EXPECT_EQ(kind, ErrorKind::Timeout);
  EXPECT_NE(msg.find("2/3 joined, missing rank(s) 2"), std::string::npos) << msg;
}

TEST(Rendezvous, AllRanksMeetAndLearnEachOthersHosts) {
  uint16_t port = free_port();
  std::vector<std::thread> ranks;
  std::vector<size_t> hosts_seen(3);
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      Rendezvous rv(RankEnv{r, 3, r, {"127.0.0.1", port}}, 10s, "");
      hosts_seen[static_cast<size_t>(r)] = rv.hosts().size();
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(hosts_seen, (std::vector<size_t>{3, 3, 3}));
}

}  // namespace
}  // namespace dsx::comm
