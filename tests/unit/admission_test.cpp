// Admission of unauthenticated connections (caps in total and per address) and
// the accept loop at the descriptor limit, on a real listening socket: a child
// process lowers its own limit and fills it, so that accept fails with EMFILE
// while clients wait in the backlog.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <vector>

#include "tensorwire/net/accept_loop.hpp"
#include "tensorwire/net/admission.hpp"
#include "tensorwire/net/listener.hpp"

namespace tw::net {
namespace {

namespace asio = boost::asio;

TEST(Admission, CapsInTotalAndPerAddressAndFreesSlotsOnRelease) {
  Admission a(4, 2);
  std::string why;
  auto t1 = a.admit("10.0.0.1", &why);
  auto t2 = a.admit("10.0.0.1", &why);
  ASSERT_TRUE(t1 && t2);
  EXPECT_FALSE(a.admit("10.0.0.1", &why));
  EXPECT_EQ(why, "2 unauthenticated connections from 10.0.0.1 open already (the cap per address)");
  auto t3 = a.admit("10.0.0.2", &why);
  auto t4 = a.admit("10.0.0.3", &why);
  ASSERT_TRUE(t3 && t4);
  EXPECT_FALSE(a.admit("10.0.0.4", &why));
  EXPECT_EQ(why, "4 unauthenticated connections open already (the cap)");
  EXPECT_EQ(a.pending(), 4u);
  EXPECT_EQ(a.refused(), 2u);
  t1->release();
  t1->release();  // twice is once
  EXPECT_EQ(a.pending(), 3u);
  EXPECT_TRUE(a.admit("10.0.0.1", &why));  // a temporary: released at once
  {
    Admission::Ticket moved = std::move(*t2);
    EXPECT_FALSE(t2->held());
    EXPECT_EQ(a.pending(), 3u);
  }
  EXPECT_EQ(a.pending(), 2u);
  // A ticket outlives its Admission safely.
  std::optional<Admission::Ticket> late;
  {
    Admission b(1, 1);
    late = b.admit("x", nullptr);
  }
  late->release();
}

// An eviction callback per name, which notes the name in `closed` when called.
auto closing_into(std::vector<std::string>& closed) {
  return [&closed](std::string name) { return std::function<void()>([&closed, name] { closed.push_back(name); }); };
}

// At a cap the newcomer gets in and the oldest connection in its way is closed:
// the oldest from its own address at the cap per address, the oldest from the
// address holding the most at the cap in total. A stranger holding every slot
// cannot keep a real peer out.
TEST(Admission, AtACapTheOldestInTheWayIsEvicted) {
  Admission a(4, 2);
  std::vector<std::string> closed;
  const auto closer = closing_into(closed);
  std::string why;
  auto x1 = a.admit("10.0.0.1", &why, closer("x1"));
  EXPECT_EQ(why, "");
  auto x2 = a.admit("10.0.0.1", &why, closer("x2"));
  ASSERT_TRUE(x1 && x2);
  auto x3 = a.admit("10.0.0.1", &why, closer("x3"));  // the cap per address: x1 goes
  ASSERT_TRUE(x3);
  EXPECT_EQ(closed, std::vector<std::string>{"x1"});
  EXPECT_EQ(why, "closed the oldest unauthenticated connection from 10.0.0.1: 2 unauthenticated connections from 10.0.0.1 open already (the cap per address)");
  EXPECT_FALSE(x1->held());
  EXPECT_TRUE(x2->held());
  x1->release();  // its owner sees the close and lets go: nothing more to free
  EXPECT_EQ(a.pending(), 2u);
  auto y1 = a.admit("10.0.0.2", &why, closer("y1"));
  auto z1 = a.admit("10.0.0.3", &why, closer("z1"));
  EXPECT_EQ(a.pending(), 4u);
  // The cap in total: 10.0.0.1 holds the most, its oldest (x2) goes, not y1 or z1.
  auto w1 = a.admit("10.0.0.4", &why, closer("w1"));
  ASSERT_TRUE(w1);
  EXPECT_EQ(closed, (std::vector<std::string>{"x1", "x2"}));
  EXPECT_EQ(why, "closed the oldest unauthenticated connection from 10.0.0.1: 4 unauthenticated connections open already (the cap)");
  EXPECT_TRUE(y1->held() && z1->held() && x3->held());
  EXPECT_EQ(a.pending(), 4u);
  EXPECT_EQ(a.evicted(), 2u);
  EXPECT_EQ(a.refused(), 0u);
}

// At the cap in total with every address holding one connection, the oldest goes
// first: the one admitted last is not the next to go.
TEST(Admission, TiesGoByAge) {
  Admission a(3, 3);
  std::vector<std::string> closed;
  const auto closer = closing_into(closed);
  std::string why;
  auto t1 = a.admit("10.0.0.1", &why, closer("1"));
  auto t2 = a.admit("10.0.0.2", &why, closer("2"));
  auto t3 = a.admit("10.0.0.3", &why, closer("3"));
  auto t4 = a.admit("10.0.0.4", &why, closer("4"));
  auto t5 = a.admit("10.0.0.5", &why, closer("5"));
  auto t6 = a.admit("10.0.0.6", &why, closer("6"));
  EXPECT_EQ(closed, (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_TRUE(t4->held() && t5->held() && t6->held());
  // An address holding two goes before any holding one, even if younger.
  auto t7 = a.admit("10.0.0.6", &why, closer("7"));
  EXPECT_EQ(closed.back(), "4");
  auto t8 = a.admit("10.0.0.8", &why, closer("8"));
  EXPECT_EQ(closed.back(), "6");
  EXPECT_TRUE(t5->held() && t7->held() && t8->held());
}

// A connection given no way to close it is never evicted; where only such ones
// are in the way the newcomer is refused. A closer that releases its own ticket
// (as a connection's owner may, seeing the close at once) frees nothing twice.
TEST(Admission, OnlyConnectionsThatCanBeClosedAreEvicted) {
  Admission a(2, 2);
  std::string why;
  auto fixed = a.admit("10.0.0.1", &why);
  std::optional<Admission::Ticket> self;
  bool closed = false;
  self = a.admit("10.0.0.2", &why, [&] {
    closed = true;
    self->release();
  });
  ASSERT_TRUE(fixed && self);
  auto next = a.admit("10.0.0.3", &why, [] {});  // fixed is older, but self is the one that can go
  ASSERT_TRUE(next);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(fixed->held());
  EXPECT_EQ(a.pending(), 2u);
  Admission b(1, 1);
  auto only = b.admit("10.0.0.1", &why);
  EXPECT_FALSE(b.admit("10.0.0.1", &why, [] {}));
  EXPECT_EQ(why, "1 unauthenticated connections from 10.0.0.1 open already (the cap per address)");
  EXPECT_EQ(b.refused(), 1u);
  EXPECT_EQ(b.evicted(), 0u);
}

TEST(Admission, RefusalsAreLoggedAtPowersOfTen) {
  std::vector<std::uint64_t> logged;
  for (std::uint64_t n = 1; n <= 20000; ++n) {
    if (log_refusal(n)) logged.push_back(n);
  }
  EXPECT_EQ(logged, (std::vector<std::uint64_t>{1, 10, 100, 1000, 10000}));
}

TEST(Admission, TheCapLeavesTheRunItsDescriptors) {
  EXPECT_EQ(pending_cap(1024, 100), 128u);
  EXPECT_EQ(pending_cap(200, 70), 32u);
  EXPECT_EQ(pending_cap(64, 70), 4u);  // the run needs more than there is: still a few
  EXPECT_EQ(pending_cap(0, 0), 4u);
}

// Fills every descriptor the process may have, returns them for closing.
std::vector<int> fill_descriptors() {
  std::vector<int> fds;
  for (;;) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  return fds;
}

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True if the peer closed `fd` within 2 s (a read returns 0 or an error).
bool closed_by_peer(int fd) {
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c = 0;
  const auto n = ::recv(fd, &c, 1, 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Out of descriptors, the loop neither spins nor leaves clients hanging: each
// EMFILE takes one waiting connection with the reserve and closes it (its client
// sees the close), and once descriptors are free again it accepts as before.
TEST(AcceptLoop, OutOfDescriptorsItClosesTheWaitingAndRecovers) {
  asio::io_context probe;
  auto listener = open_listener(probe, boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
  const std::uint16_t port = listener.local_endpoint().port();
  int go[2], done[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: its own limit, the loop running, then every descriptor taken.
    rlimit r{256, 256};
    ::setrlimit(RLIMIT_NOFILE, &r);
    asio::io_context ctx;
    auto acceptor = adopt_listener(ctx, UniqueFd(::dup(listener.native_handle())));
    AcceptCounters counters;
    std::vector<boost::asio::ip::tcp::socket> accepted;
    asio::co_spawn(ctx, accept_connections(acceptor, [&](boost::asio::ip::tcp::socket s) { accepted.push_back(std::move(s)); },
                                           [](const std::string&) {}, &counters),
                   asio::detached);
    ctx.poll();
    std::vector<int> filler = fill_descriptors();
    char c = 1;
    if (::write(done[1], &c, 1) != 1) ::_exit(10);
    ctx.run_for(std::chrono::milliseconds(600));  // the parent's 3 clients wait meanwhile
    const std::uint64_t emfile = counters.out_of_descriptors;
    for (int fd : filler) ::close(fd);
    if (::write(done[1], &c, 1) != 1) ::_exit(11);
    if (::read(go[0], &c, 1) != 1) ::_exit(12);
    ctx.run_for(std::chrono::milliseconds(300));
    // 3 clients, 3 EMFILEs (one each); a spinning loop would count thousands.
    if (emfile < 3 || emfile > 6) ::_exit(20 + static_cast<int>(std::min<std::uint64_t>(emfile, 9)));
    if (counters.accepted != 1 || accepted.size() != 1) ::_exit(30 + static_cast<int>(std::min<std::size_t>(accepted.size(), 9)));
    ::_exit(0);
  }
  listener.close();
  char c = 0;
  ASSERT_EQ(::read(done[0], &c, 1), 1);
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(connect_to(port));
  for (int fd : clients) {
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(closed_by_peer(fd));
    ::close(fd);
  }
  ASSERT_EQ(::read(done[0], &c, 1), 1);
  const int later = connect_to(port);
  ASSERT_EQ(::write(go[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "20+n: n EMFILEs; 30+n: n accepted";
  ::close(later);
  for (int fd : {go[0], go[1], done[0], done[1]}) ::close(fd);
}

// On real sockets: the newcomer from the same address takes the slot, the oldest
// connection is shut down (its client sees the close, its owner's read ends),
// and a descriptor that no longer is the admitted connection is left alone.
TEST(AdmitSocket, TheOldestConnectionIsShutDownForANewOne) {
  asio::io_context ctx;
  auto listener = open_listener(ctx, boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
  const std::uint16_t port = listener.local_endpoint().port();
  Admission admission(8, 1);
  std::vector<std::string> lines;
  auto log = [&lines](const std::string& line) { lines.push_back(line); };
  const int c1 = connect_to(port);
  const int c2 = connect_to(port);
  ASSERT_GE(c1, 0);
  ASSERT_GE(c2, 0);
  boost::asio::ip::tcp::socket s1 = listener.accept();
  boost::asio::ip::tcp::socket s2 = listener.accept();
  EXPECT_FALSE(same_connection(s2.native_handle(), s1.local_endpoint(), s1.remote_endpoint()));
  auto t1 = admit_socket(admission, s1, "a connection", log);
  ASSERT_TRUE(t1);
  EXPECT_TRUE(lines.empty());
  auto t2 = admit_socket(admission, s2, "a connection", log);
  ASSERT_TRUE(t2);
  EXPECT_FALSE(t1->held());
  EXPECT_TRUE(closed_by_peer(c1));  // the client of the oldest
  char c = 0;
  EXPECT_EQ(::recv(s1.native_handle(), &c, 1, 0), 0);  // its owner's read ends
  EXPECT_TRUE(s1.is_open());  // shut down, not closed: the owner closes it
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("made room for a connection from 127.0.0.1: closed the oldest unauthenticated connection from 127.0.0.1: ", 0), 0u)
      << lines[0];
  ASSERT_EQ(::send(c2, "x", 1, 0), 1);  // the newcomer is untouched
  EXPECT_EQ(::recv(s2.native_handle(), &c, 1, 0), 1);
  ::close(c1);
  ::close(c2);
}

}  // namespace
}  // namespace tw::net
