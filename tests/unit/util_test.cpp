#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tensorwire/util/system_call.hpp"
#include "tensorwire/util/temp_dir.hpp"
#include "tensorwire/util/unique_fd.hpp"

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

}  // namespace
}  // namespace tw
