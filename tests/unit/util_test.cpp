#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tensorwire/util/heap.hpp"
#include "tensorwire/core/output_check.hpp"
#include "tensorwire/util/output_path.hpp"
#include "tensorwire/util/parallel.hpp"
#include "tensorwire/util/printable.hpp"
#include "tensorwire/util/system_call.hpp"
#include "tensorwire/util/tcp_congestion.hpp"
#include "tensorwire/util/temp_dir.hpp"
#include "tensorwire/util/unique_fd.hpp"
#include "../support/page_faults.hpp"

namespace tw {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesOnceAndMoves) {
  int raw = -1;
  {
    UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = a.get();
    ASSERT_TRUE(is_open(raw));
    UniqueFd b = std::move(a);
    EXPECT_FALSE(a);
    EXPECT_EQ(b.get(), raw);
    UniqueFd c;
    c = std::move(b);
    EXPECT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
  UniqueFd d(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int kept = d.release();
  d.reset();
  EXPECT_TRUE(is_open(kept));
  ::close(kept);
}

TEST(SystemCall, NamesTheCallThatFailed) {
  try {
    system_call("open /nonexistent/x", ::open("/nonexistent/x", O_RDONLY));
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_EQ(std::string(e.what()).rfind("open /nonexistent/x: ", 0), 0U) << e.what();
  }
  EXPECT_EQ(system_call("getpid", ::getpid()), ::getpid());
}

// A directory named with a pid that no process has is removed with what it
// holds; one of a live process, one of another prefix, a file and a malformed
// name are left alone.
TEST(TempDir, StaleDirectoriesOfDeadProcessesAreRemoved) {
  TempDir parent("tw-stale-test");
  const std::string p = parent.path();
  const std::string dead = p + "/tw-agent-2147483000-abc";  // beyond any pid_max
  const std::string alive = p + "/tw-agent-" + std::to_string(::getpid()) + "-def";
  std::filesystem::create_directories(dead + "/sub");
  std::ofstream(dead + "/sub/records") << "x";
  std::filesystem::create_directories(alive);
  std::filesystem::create_directories(p + "/tw-other-2147483000-x");
  std::filesystem::create_directories(p + "/tw-agent-12ab-x");
  std::ofstream(p + "/tw-agent-2147483001-file") << "x";
  EXPECT_EQ(remove_stale_temp_dirs(p, "tw-agent"), 1u);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(p + "/tw-other-2147483000-x"));
  EXPECT_TRUE(std::filesystem::exists(p + "/tw-agent-12ab-x"));
  EXPECT_TRUE(std::filesystem::exists(p + "/tw-agent-2147483001-file"));
  EXPECT_EQ(remove_stale_temp_dirs(p + "/missing", "tw-agent"), 0u);
}

// A killed run's agents are zombies until init reaps them: dead all the same.
TEST(TempDir, TheDirectoryOfAZombieIsStale) {
  TempDir parent("tw-stale-test");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie until waitpid below.
  for (int i = 0; i < 500; ++i) {
    std::ifstream in("/proc/" + std::to_string(child) + "/stat");
    std::string stat;
    std::getline(in, stat);
    if (stat.find(") Z ") != std::string::npos) break;
    ::usleep(2000);
  }
  const std::string zombie = parent.path() + "/tw-agent-" + std::to_string(child) + "-abc";
  std::filesystem::create_directories(zombie);
  EXPECT_EQ(remove_stale_temp_dirs(parent.path(), "tw-agent"), 1u);
  EXPECT_FALSE(std::filesystem::exists(zombie));
  int st = 0;
  ::waitpid(child, &st, 0);
}

TEST(TempDir, RemovesItselfAndWhatItHolds) {
  std::string path;
  {
    TempDir d("tw-util-test");
    path = d.path();
    ASSERT_TRUE(std::filesystem::is_directory(path));
    std::ofstream(path + "/f") << "x";
    std::filesystem::create_directory(path + "/sub");
    TempDir moved = std::move(d);
    EXPECT_TRUE(d.path().empty());
    EXPECT_EQ(moved.path(), path);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(TempDir("x", "/nonexistent-parent"), std::system_error);
}

using test::minor_faults;

// A block given back and asked for again is served from the heap, not mapped
// anew (which faults every page in again). Sanitizers bring their own allocator.
TEST(Heap, AFreedBlockIsReusedWithoutPageFaults) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator, not glibc's";
#else
  reuse_freed_memory();
  constexpr std::size_t kSize = 8 << 20;
  const auto fill = [](std::size_t n) {
    auto* p = static_cast<volatile char*>(std::malloc(n));
    for (std::size_t i = 0; i < n; i += 4096) p[i] = 1;
    std::free(const_cast<char*>(p));
  };
  fill(kSize);
  const long before = minor_faults();
  fill(kSize);
  // 2048 pages if it were mapped anew; a few for whatever else ran.
  EXPECT_LT(minor_faults() - before, 64);
#endif
}

// Memory reserved with huge pages advised is faulted in 2 MiB at a time where the
// kernel offers transparent huge pages to those who ask (enabled "always" or
// "madvise"), 4 KiB at a time otherwise.
TEST(Heap, AReservationAdvisedHugePagesFaultsA2MiBPageAtATime) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator and shadow memory fault pages of their own";
#else
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (mode.find("[always]") == std::string::npos && mode.find("[madvise]") == std::string::npos) {
    GTEST_SKIP() << "no transparent huge pages on madvise here: " << mode;
  }
  const auto touch = [](std::vector<std::uint64_t>& v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) v.push_back(i);
  };
  constexpr std::size_t kCount = (64u << 20) / sizeof(std::uint64_t);  // 64 MiB: 16384 pages of 4 KiB
  std::vector<std::uint64_t> advised;
  reserve_huge(advised, kCount);
  ASSERT_GE(advised.capacity(), kCount);
  long before = minor_faults();
  touch(advised, kCount);
  const long huge = minor_faults() - before;
  std::vector<std::uint64_t> plain;
  plain.reserve(kCount);
  before = minor_faults();
  touch(plain, kCount);
  const long small = minor_faults() - before;
  EXPECT_GT(small, 8000) << "the baseline: one fault per 4 KiB page";
  // 32 huge pages, plus the pages at either end outside a whole 2 MiB page;
  // a kernel short of free huge pages falls back to small ones for some.
  EXPECT_LT(huge, small / 8) << "huge " << huge << ", small " << small;
#endif
}

// What an error quotes from a file prints on one line, without the escape
// sequences a forged file can carry (a title, a cleared screen).
TEST(Printable, ControlCharactersAreEscaped) {
  EXPECT_EQ(printable("rank 1: fine"), "rank 1: fine");
  EXPECT_EQ(printable("a\nb\x1b]0;pwn\x07\x1b[2J\x7f"), "a\\x0ab\\x1b]0;pwn\\x07\\x1b[2J\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 stays
}

// An output is never an input, nor a data file inside an input directory, nor a
// directory; a device or a FIFO is written in place, never replaced.
TEST(OutputPath, NeverAnInputAndDevicesWrittenInPlace) {
  TempDir d("tw-output-path-test");
  const std::string run = d.path() + "/run", in = d.path() + "/p.yaml";
  std::filesystem::create_directory(run);
  std::ofstream(run + "/rank-0.json") << "{}";
  std::ofstream(in) << "x";
  const auto why = [](const std::string& out, const std::vector<std::string>& inputs) -> std::string {
    try {
      check_output_path(out, inputs);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "allowed";
  };
  EXPECT_EQ(why(in, {in}), in + ": is one of the inputs (" + in + "); write elsewhere");
  EXPECT_EQ(why(run + "/rank-0.json", {run}), run + "/rank-0.json: would overwrite a file of the input " + run + "; write elsewhere");
  EXPECT_EQ(why(run + "/../run/rank-0.json", {run}), run + "/../run/rank-0.json: would overwrite a file of the input " + run + "; write elsewhere");
  EXPECT_EQ(why(run, {in}), run + ": is a directory (the output is a file)");
  EXPECT_EQ(why(run + "/report.html", {run}), "allowed");  // a new file beside the run's own
  std::ofstream(run + "/report.html") << "old";
  EXPECT_EQ(why(run + "/report.html", {run}), "allowed");  // not a file the readers read
  EXPECT_EQ(why(run + "/new.json", {run}), "allowed");     // not there yet
  std::ofstream(run + "/analysis.json") << "{}";
  EXPECT_EQ(why(run + "/analysis.json", {run}), "allowed");  // written beside the run before: not one of its files
  std::ofstream(run + "/rank-0.twr") << "x";
  EXPECT_NE(why(run + "/rank-0.twr", {run}), "allowed");
  EXPECT_EQ(why(d.path() + "/elsewhere.json", {run, in}), "allowed");
  EXPECT_FALSE(written_in_place(in));
  EXPECT_FALSE(written_in_place(run));
  EXPECT_FALSE(written_in_place(d.path() + "/missing"));
  EXPECT_TRUE(written_in_place("/dev/null"));
  write_in_place("/dev/null", "discarded");
  const std::string fifo = d.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(written_in_place(fifo));
  // A symlink is written through, truncated, and stays a symlink.
  const std::string link = d.path() + "/link";
  std::filesystem::create_symlink(in, link);
  EXPECT_TRUE(written_in_place(link));
  write_in_place(link, "y");
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  std::ifstream back(in);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(back), {}), "y");
  try {
    write_in_place("/dev/full", "x");
    ADD_FAILURE() << "/dev/full took a byte";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "/dev/full: cannot write: No space left on device");
  }
}

}  // namespace
}  // namespace tw

namespace tw {
namespace {

TEST(ParallelFor, EveryPieceOnceOnAnyNumberOfThreads) {
  for (const unsigned threads : {0U, 1U, 2U, 7U}) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
      std::vector<std::atomic<int>> seen(n);
      parallel_for(n, threads, [&](std::size_t i) { seen[i].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << i << " of " << n << ", " << threads << " threads";
    }
  }
}

TEST(ParallelFor, PiecesRunAtTheSameTime) {
  // Piece 0 waits (at most 10 s) for piece 1 to begin: only a second thread can begin it.
  std::atomic<bool> second{false};
  bool waited_in_vain = false;
  parallel_for(2, 2, [&](std::size_t i) {
    if (i == 1) {
      second = true;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!second && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    waited_in_vain = !second;
  });
  EXPECT_FALSE(waited_in_vain);
}

TEST(ParallelFor, TheLowestFailureIsRethrownAndNoPieceBegunAfterIt) {
  for (const unsigned threads : {1U, 3U}) {
    std::atomic<int> ran{0};
    try {
      parallel_for(100000, threads, [&](std::size_t i) {
        ran.fetch_add(1);
        // Piece 20 fails later than piece 10 began: the one thread would meet 10's first.
        if (i == 20) throw std::runtime_error("piece 20");
        if (i == 10) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          throw std::runtime_error("piece 10");
        }
      });
      ADD_FAILURE() << "no exception, " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "piece 10") << threads << " threads";
    }
    EXPECT_LT(ran.load(), 100000) << threads << " threads";
  }
}

TEST(ParallelFor, ThreadsForCoresPiecesAndMemory) {
  const unsigned cores = usable_cores();
  EXPECT_EQ(threads_for(1000, 0, 0), cores);  // no memory said: one per core
  EXPECT_EQ(threads_for(1, 0, 0), 1U);  // no more than the pieces
  EXPECT_EQ(threads_for(0, 0, 0), 1U);
  EXPECT_EQ(threads_for(1000, 1 << 20, 0), 1U);  // no memory beside the first
  EXPECT_EQ(threads_for(1000, 1 << 20, (1 << 20) + 1), std::min(cores, 2U));  // room for one more
  EXPECT_EQ(threads_for(1000, 1 << 20, std::size_t{1} << 40), cores);
}

// A process restricted to some cores (taskset, a container's cpuset) counts
// those, as the processes it starts will: hardware_concurrency() counts every
// core online. sched_setaffinity(0) restricts the calling thread only.
TEST(UsableCores, CountTheAffinityMaskNotTheCoresOnline) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_EQ(usable_cores(), static_cast<unsigned>(CPU_COUNT(&mine)));
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  unsigned on_one = 0, threads = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0) return;
    on_one = usable_cores();
    threads = threads_for(1000, 0, 0);
  }).join();
  EXPECT_EQ(on_one, 1U);
  EXPECT_EQ(threads, 1U);  // one per core it may use
}

// The kernel's own answers on a real socket: reno is built into every Linux, a
// made-up name is on none.
TEST(TcpCongestion, SetsReadsAndExplainsARefusal) {
  EXPECT_EQ(congestion_name_problem("cubic"), "");
  EXPECT_EQ(congestion_name_problem("bbr_v2-x"), "");
  EXPECT_NE(congestion_name_problem(""), "");
  EXPECT_NE(congestion_name_problem(std::string(16, 'a')), "");
  EXPECT_NE(congestion_name_problem("a/b"), "");
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(fd);
  const auto before = congestion_control(fd.get());
  ASSERT_TRUE(before.has_value());
  EXPECT_FALSE(before->empty());
  EXPECT_EQ(set_congestion_control(fd.get(), "reno"), "");
  EXPECT_EQ(congestion_control(fd.get()), "reno");
  const std::string why = set_congestion_control(fd.get(), "nosuchcc");
  EXPECT_NE(why.find("'nosuchcc' is not available on this host (it has: "), std::string::npos) << why;
  EXPECT_NE(why.find("reno"), std::string::npos) << why;
  EXPECT_EQ(congestion_control(fd.get()), "reno");  // a refusal changes nothing
  EXPECT_EQ(probe_congestion_control("reno"), "reno");
  EXPECT_EQ(probe_congestion_control(""), *before);
  try {
    probe_congestion_control("nosuchcc");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--congestion-control: 'nosuchcc' is not available", 0), 0u) << e.what();
  }
  const UniqueFd udp(::socket(AF_INET, SOCK_DGRAM, 0));
  EXPECT_FALSE(congestion_control(udp.get()).has_value());
  EXPECT_TRUE(paces("bbr"));
  EXPECT_TRUE(paces("bbr2"));
  EXPECT_FALSE(paces("cubic"));
  EXPECT_FALSE(paces("reno"));
}

}  // namespace
}  // namespace tw
