// Files as a hostile user hands them over: devices, FIFOs, directories and huge
// files refused before reading; JSON fields of the wrong type or out of range
// named with their file; records whose counts or indices do not fit the profile
// or the file refused before anyone sizes an array by them.
#include "tensorwire/core/data_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "inline_profile.hpp"
#include "tensorwire/core/json_value.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/records.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw {
namespace {

std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(JsonExact, NumbersOnlyAsWhatTheyMustBe) {
  using nlohmann::json;
  EXPECT_EQ(json_exact<std::uint16_t>(json(65535)), 65535);
  EXPECT_FALSE(json_exact<std::uint16_t>(json(65536)));
  EXPECT_FALSE(json_exact<std::uint64_t>(json(-1)));
  EXPECT_FALSE(json_exact<std::int64_t>(json(std::uint64_t{1} << 63)));
  EXPECT_FALSE(json_exact<std::uint64_t>(json(3.7e31)));  // undefined behaviour through get<>()
  EXPECT_FALSE(json_exact<int>(json(1.0)));
  EXPECT_FALSE(json_exact<bool>(json(1)));
  EXPECT_EQ(json_exact<double>(json(3)), 3.0);
  EXPECT_FALSE(json_exact<std::string>(json(3)));
  EXPECT_EQ(json_exact<std::vector<std::int64_t>>(json::parse("[1, -2]")), (std::vector<std::int64_t>{1, -2}));
  EXPECT_FALSE(json_exact<std::vector<std::int64_t>>(json::parse("[1, 2.5]")));
  EXPECT_FALSE(json_exact<std::vector<std::int64_t>>(json::parse("{}")));
}

TEST(DataFile, OnlyRegularFilesOfASaneSize) {
  TempDir d("tw-data-file");
  const std::string fifo = d.path() + "/fifo", small = d.path() + "/small.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(small) << R"({"a": 1})";
  EXPECT_EQ(data_file_problem("/dev/zero", 1 << 20), "is not a regular file");
  EXPECT_EQ(data_file_problem(fifo, 1 << 20), "is not a regular file");  // and no open: it would block
  EXPECT_EQ(data_file_problem(d.path(), 1 << 20), "is a directory");
  EXPECT_EQ(data_file_problem(d.path() + "/none", 1 << 20), "cannot open: No such file or directory");
  std::uint64_t size = 0;
  EXPECT_EQ(data_file_problem(small, 1 << 20, &size), "");
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(data_file_problem(small, 4), "is 8 B, more than the 4 B such a file may be");
  EXPECT_EQ(thrown([&] { read_json_file("/dev/zero"); }), "/dev/zero: is not a regular file");
  EXPECT_EQ(read_json_file(small)["a"], 1);
  std::ofstream(small) << R"({"a": )";
  EXPECT_TRUE(thrown([&] { read_json_file(small); }).starts_with(small + ": not valid JSON: "));
}

// Nesting is bounded before parsing, by a scan that skips strings: brackets and
// escaped quotes inside them do not count, 64 levels are read, 65 refused.
TEST(DataFile, JsonNestingIsBoundedOutsideStrings) {
  TempDir d("tw-data-file");
  const std::string file = d.path() + "/nested.json";
  const auto nested = [](int levels, const std::string& inner) {
    std::string t;
    for (int k = 0; k < levels; ++k) t += "[";
    t += inner;
    for (int k = 0; k < levels; ++k) t += "]";
    return t;
  };
  std::ofstream(file) << nested(64, "1");
  EXPECT_NO_THROW(read_json_file(file));
  std::ofstream(file) << nested(65, "1");
  EXPECT_EQ(thrown([&] { read_json_file(file); }), file + ": nesting deeper than 64 levels");
  const std::string brackets = R"("[[[[{{{{ \\ [[[[ \" {{{{")";
  std::ofstream(file) << nested(64, std::string(200, ' ') + brackets);
  EXPECT_EQ(read_json_file(file).dump().size(), 64 * 2 + nlohmann::json::parse(brackets).dump().size());
  // A string that ends in an escaped backslash ends there: what follows counts.
  std::ofstream(file) << R"(["x\\", )" + nested(64, "1") + "]";
  EXPECT_EQ(thrown([&] { read_json_file(file); }), file + ": nesting deeper than 64 levels");
  // A string left open is the parser's to report.
  std::ofstream(file) << R"({"a": "[[[[)";
  EXPECT_TRUE(thrown([&] { read_json_file(file); }).starts_with(file + ": not valid JSON: "));
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// f() in a child process whose address space may grow by `more` bytes beyond
// what it has: the child's exit status, 100 + the signal when it was killed.
int with_memory_left(std::size_t more, const std::function<int()>& f) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    rlimit r{};
    ::getrlimit(RLIMIT_AS, &r);  // the hard limit kept: raising it is refused where it is finite
    r.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + more;
    if (::setrlimit(RLIMIT_AS, &r) != 0) ::_exit(99);
    ::_exit(f());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}
#endif

// A file within its size limit can ask for more memory than the machine has (a
// YAML tree takes tens of times its text, a JSON array of small numbers 8 times):
// the error names the file, where it said only "out of memory".
TEST(DataFile, RunningOutOfMemoryNamesTheFile) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator reports running out of memory itself";
#else
  const TempDir d("tw-oom-test");
  const std::string json = d.path() + "/big.json", yaml = d.path() + "/big.yaml";
  {
    std::ofstream out(json);
    out << "[";
    for (int i = 0; i < 8'000'000; ++i) out << "1,";
    out << "1]";
  }
  {
    std::ofstream out(yaml);
    out << "version: 1\nzzz: [";
    for (int i = 0; i < 4'000'000; ++i) out << "1,";
    out << "1]\n";
  }
  constexpr std::size_t kLeft = 48u << 20;  // each file is 16 MB or less, what it parses into more than 100 MB
  EXPECT_EQ(with_memory_left(kLeft, [&] {
              try {
                read_json_file(json);
                return 2;
              } catch (const std::runtime_error& e) {
                return std::string(e.what()) == json + ": out of memory reading it: it asks for more than this machine has" ? 0 : 1;
              }
            }), 0);
  EXPECT_EQ(with_memory_left(kLeft, [&] {
              const ProfileLoad load = load_profile_file(yaml);
              if (load.ok()) return 2;
              return load.diagnostics.size() == 1 && load.diagnostics[0].str() == yaml + ": out of memory reading it: it asks for more than this machine has" ? 0 : 1;
            }), 0);
#endif
}

TEST(DataFile, FieldsAreCheckedAndNameTheirFile) {
  const auto j = nlohmann::json::parse(R"({"n": -1, "big": 4000000000, "s": "x", "b": 1, "ok": 7})");
  EXPECT_EQ(thrown([&] { json_count(j, "n", "f.json", 100); }), "f.json: 'n' must be a whole number from 0 to 100, not -1");
  EXPECT_EQ(thrown([&] { json_count(j, "big", "f.json", 10'000'000); }),
            "f.json: 'big' must be a whole number from 0 to 10000000, not 4000000000");
  EXPECT_EQ(thrown([&] { json_count(j, "s", "f.json", 100); }), "f.json: 's' must be a whole number from 0 to 100, not \"x\"");
  EXPECT_EQ(thrown([&] { json_bool(j, "b", "f.json"); }), "f.json: 'b' must be true or false, not 1");
  EXPECT_EQ(thrown([&] { json_string(j, "ok", "f.json"); }), "f.json: 'ok' must be a string, not 7");
  EXPECT_EQ(json_count(j, "ok", "f.json", 100), 7u);
  EXPECT_EQ(json_count(j, "missing", "f.json", 100, 3), 3u);
  EXPECT_EQ(thrown([&] { with_file("g.json", [&] { return j["s"].get<int>(); }); }), "g.json: type must be number, but is string");
  EXPECT_EQ(path_named_by("runs/a/rank-0.json", "p.yaml"), "runs/a/p.yaml");
  EXPECT_EQ(path_named_by("runs/a/rank-0.json", "/abs/p.yaml"), "/abs/p.yaml");
}

TEST(DataFile, JsonOutputCarriesNamesThatAreNotUtf8) {
  // A name a traced job gave (an annotation, a thread) may hold any bytes.
  const nlohmann::json j = {{"name", std::string("op\xff")}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  EXPECT_EQ(json_text(j), "{\"name\":\"op\xef\xbf\xbd\"}");
  EXPECT_EQ(thrown([&] { json_int(j, "name", "f.json"); }), "f.json: 'name' must be a whole number, not \"op\xef\xbf\xbd\"");
}

// run.json: none is null; one that is not an object, or whose time_scale no run
// could have used, is refused naming the file (a time_scale of 1e30 scaled a
// whole analysis to zeros).
TEST(DataFile, ARunsAccountIsCheckedBeforeUse) {
  TempDir d("tw-run");
  const std::string file = run_dir::run_file(d.path());
  const auto write = [&](const std::string& text) { std::ofstream(file) << text; };
  EXPECT_TRUE(run_dir::read_run(d.path()).is_null());
  write(R"({"state": "done", "time_scale": 2.5})");
  EXPECT_EQ(run_dir::read_run(d.path())["time_scale"], 2.5);
  write(R"({"state": "done"})");
  EXPECT_FALSE(run_dir::read_run(d.path()).contains("time_scale"));
  write("[1, 2]");
  EXPECT_EQ(thrown([&] { run_dir::read_run(d.path()); }), file + ": not a run's account: a JSON object expected");
  for (const char* k : {"1e30", "0", "-1", "1000.5", "1e-300"}) {
    write(std::string(R"({"time_scale": )") + k + "}");
    EXPECT_EQ(thrown([&] { run_dir::read_run(d.path()); }),
              file + ": 'time_scale' must be from 0.001 to 1000.0, not " + nlohmann::json::parse(k).dump())
        << k;
  }
  write(R"({"time_scale": "x"})");
  EXPECT_EQ(thrown([&] { run_dir::read_run(d.path()); }), file + ": 'time_scale' must be a number, not \"x\"");
}

TEST(DataFile, ASummaryIsCheckedBeforeUse) {
  TempDir d("tw-summary");
  const auto write = [&](const std::string& text) { std::ofstream(run_dir::summary_file(d.path(), 0)) << text; };
  const std::string file = run_dir::summary_file(d.path(), 0);
  EXPECT_TRUE(thrown([&] { run_dir::read_summary(d.path(), 0); }).find("missing") != std::string::npos);
  write(R"({"rank": 0, "iterations": 3, "finished": true, "iteration_times_ns": [[1, 2]], "counters": {"bytes_received": 5}})");
  EXPECT_EQ(run_dir::read_summary(d.path(), 0)["iterations"], 3);
  write(R"({"iterations": -1})");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": 'iterations' must be a whole number from 0 to 10000000, not -1");
  write(R"({"rank": 2})");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": names rank 2, but is the file of rank 0");
  write(R"({"iteration_times_ns": [[1, "a"]]})");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": 'iteration_times_ns' entry 0 must be [start, end] in ns");
  write(R"({"counters": {"bytes_received": -5}})");
  EXPECT_TRUE(thrown([&] { run_dir::read_summary(d.path(), 0); }).starts_with(file + ": counters: 'bytes_received' must be"));
  write(R"({"clock": {"bound_ns": "x"}})");
  EXPECT_TRUE(thrown([&] { run_dir::read_summary(d.path(), 0); }).starts_with(file + ": clock: 'bound_ns' must be"));
  write("[1, 2]");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": not a summary: a JSON object expected");
  write("{}");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": not a complete summary: 'rank' is missing");
  write(R"({"rank": 0, "iterations": 3, "finished": true, "error": "no progress"})");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": says the rank finished, and gives an error (no progress)");
  write(R"({"rank": 0, "iterations": 3, "finished": null})");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": not a complete summary: 'finished' is missing");
  // A null is a field left out: whoever reads the summary next finds nothing there.
  write(R"({"rank": 0, "iterations": 3, "finished": true, "start_ns": null, "options": {"spin_ns": null, "realtime": true}})");
  const nlohmann::json j = run_dir::read_summary(d.path(), 0);
  EXPECT_FALSE(j.contains("start_ns"));
  EXPECT_FALSE(j["options"].contains("spin_ns"));
  EXPECT_TRUE(j["options"]["realtime"].get<bool>());
  // Objects nested deeper than any of tensorwire's files are refused as they open
  // (50 million '[' took 3.7 GB before the parser found the end of the file).
  std::string deep;
  for (int k = 0; k < 100000; ++k) deep += R"({"a": )";
  deep += "null";
  for (int k = 0; k < 100000; ++k) deep += "}";
  write(R"({"rank": 0, "iterations": 3, "finished": true, "x": )" + deep + "}");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }), file + ": nesting deeper than 64 levels");
  // The options compare and analyze scale by: within what the options that set them allow.
  for (const char* f : {"0", "-1", "1e308"}) {
    write(std::string(R"({"rank": 0, "iterations": 3, "finished": true, "options": {"slowdown": )") + f + "}}");
    EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }),
              file + ": options: 'slowdown' must be from 0 (excluded) to 1000, not " + nlohmann::json::parse(f).dump())
        << f;
  }
  write(R"({"rank": 0, "iterations": 3, "finished": true, "options": {"delay_ns": 9223372036854775807}})");
  EXPECT_EQ(thrown([&] { run_dir::read_summary(d.path(), 0); }),
            file + ": options: 'delay_ns' must be from 0 to 3600000000000000 ns, not 9223372036854775807");
}

std::vector<Record> one_iteration() {
  ComputeRecord c;
  c.op = 0;
  SendRecord s;
  s.op = 1;
  s.bytes = 1000;
  IterationRecord it;
  it.start = 1'000'000;
  it.end = 2'000'000;
  return {c, s, it};
}

TEST(Records, RecordsThatDoNotFitTheProfileOrTheFileAreRefused) {
  const Profile p = test::one_message("1ms", "1000");
  std::vector<Record> r = one_iteration();
  EXPECT_EQ(check_records(r, 0, p), "");
  EXPECT_EQ(check_records(r, 1, p), "record 0: names rank 0 in the file of rank 1");
  // Records of an unfinished next iteration are allowed, not beyond it.
  r.push_back(ComputeRecord{.op = 0, .iteration = 1});
  EXPECT_EQ(check_records(r, 0, p), "");
  r.back().update<ComputeRecord>([](ComputeRecord& x) { x.iteration = 3'000'000; });
  EXPECT_EQ(check_records(r, 0, p), "record 3: iteration 3000000, but the file holds 1 iteration(s)");
  // One iteration's records with one change.
  const auto changed = [&](auto change) {
    std::vector<Record> x = one_iteration();
    change(x);
    return check_records(x, 0, p);
  };
  const auto send = [](auto f) { return [f](std::vector<Record>& x) { x[1].update<SendRecord>(f); }; };
  EXPECT_EQ(changed([](std::vector<Record>& x) { x[2].update<IterationRecord>([](IterationRecord& y) { y.iteration = 0xffffffff; }); }),
            "record 2: iteration 4294967295, but the file holds 1 iteration(s)");
  EXPECT_EQ(changed(send([](SendRecord& y) { y.op = 7; })), "record 1: op 7, but the profile has 3");
  EXPECT_EQ(changed(send([](SendRecord& y) { y.flow = 9; })), "record 1: flow 9, but the profile has 1");
  EXPECT_EQ(changed(send([](SendRecord& y) { y.op = 0; })), "record 1: a message of op c, which is no send on flow f");
  EXPECT_EQ(changed([](std::vector<Record>& x) { x[0].update<ComputeRecord>([](ComputeRecord& y) { y.op = 1; }); }),
            "record 0: a compute record of op s, which is no compute op");
  EXPECT_EQ(changed(send([](SendRecord& y) { y.bytes = ~std::uint64_t{0} - 7; })),
            "record 1: 18446744073709551608 bytes of op s, which sends 1000");
  EXPECT_EQ(changed([](std::vector<Record>& x) { x.insert(x.begin() + 2, x[1]); }), "record 2: a second record of op s in iteration 0");
  // Found by run_dir_fuzz: times far apart overflowed the timeline's differences.
  EXPECT_EQ(changed([](std::vector<Record>& x) { x[2].update<IterationRecord>([](IterationRecord& y) { y.start = -1'799'999'973'566'069'133; }); }),
            "record 2: start -1799999973566069133 is no time");
  EXPECT_EQ(changed(send([](SendRecord& y) { y.ready = std::int64_t{1} << 62; })), "record 1: ready 4611686018427387904 is no time");
  // -1 says a time was not measured; an iteration's record always has both.
  EXPECT_EQ(changed([](std::vector<Record>& x) { x[2].update<IterationRecord>([](IterationRecord& y) { y.start = -1; }); }),
            "record 2: an iteration without its start or end time");
  EXPECT_EQ(changed([](std::vector<Record>& x) { x[2].update<IterationRecord>([](IterationRecord& y) { y.end = -1; }); }),
            "record 2: an iteration without its start or end time");
  EXPECT_EQ(changed([](std::vector<Record>& x) { x[2].update<IterationRecord>([](IterationRecord& y) { y.end = 999'000; }); }),
            "record 2: an iteration that ends 1000 ns before it starts");
}

// Output keeps dump(indent)'s layout but for arrays of scalars, a line each, and
// reads back as the same value.
TEST(JsonText, ArraysOfScalarsStayOnALine) {
  using nlohmann::json;
  const auto j = json::parse(R"({"rank": 1, "iteration_times_ns": [[10, 20], [30, 40]], "none": [], "empty": {},
                                 "options": {"name": "a\"b\u00e9", "ratio": 0.25, "on": true, "gone": null},
                                 "mixed": [1, [2], {"k": "v"}]})");
  EXPECT_EQ(json_text(j, 2),
            "{\n"
            "  \"empty\": {},\n"
            "  \"iteration_times_ns\": [\n"
            "    [10,20],\n"
            "    [30,40]\n"
            "  ],\n"
            "  \"mixed\": [\n"
            "    1,\n"
            "    [2],\n"
            "    {\n"
            "      \"k\": \"v\"\n"
            "    }\n"
            "  ],\n"
            "  \"none\": [],\n"
            "  \"options\": {\n"
            "    \"gone\": null,\n"
            "    \"name\": \"a\\\"b\u00e9\",\n"
            "    \"on\": true,\n"
            "    \"ratio\": 0.25\n"
            "  },\n"
            "  \"rank\": 1\n"
            "}");
  EXPECT_EQ(json::parse(json_text(j, 2)), j);
  EXPECT_EQ(json::parse(json_text(j, 1)), j);
  EXPECT_EQ(json_text(json(3), 2), "3");
  EXPECT_EQ(json_text(json::array({1, "x"}), 2), "[1,\"x\"]");
  EXPECT_EQ(json_text(json{{"a", json::array({1, 2})}}, 1), "{\n \"a\": [1,2]\n}");
}

// Written member by member, an object comes out as json_text lays it out whole;
// a long array reaches the sink in pieces, not at the end.
TEST(JsonText, AnObjectWrittenAsItGoesIsLaidOutAsAWholeOne) {
  using nlohmann::json;
  const json wire = {{"frames", 3}, {"interfaces", json::array({"eth0", "lo"})}};
  const json expected = {{"a", json::array()},
                         {"b", json::array({json{{"k", 1}}, json{{"k", json::array({json::object(), 2})}}})},
                         {"c", wire}};
  std::string text;
  std::size_t pieces = 0;
  JsonObjectWriter w([&](std::string_view piece) { text += piece, ++pieces; }, 2);
  w.begin_array("a");
  w.end_array();
  w.begin_array("b");
  w.element(expected["b"][0]);
  w.element(expected["b"][1]);
  w.end_array();
  w.member("c", wire);
  w.finish();
  EXPECT_EQ(text, json_text(expected, 2));
  EXPECT_EQ(pieces, 1U);

  std::string empty;
  JsonObjectWriter none([&](std::string_view piece) { empty += piece; });
  none.finish();
  EXPECT_EQ(empty, "{}");

  std::string given;  // members in the order given, not sorted
  JsonObjectWriter order([&](std::string_view piece) { given += piece; }, 2);
  order.member("z", 1);
  order.member("a", 2);
  order.finish();
  EXPECT_EQ(given, "{\n  \"z\": 1,\n  \"a\": 2\n}");

  text.clear();
  pieces = 0;
  JsonObjectWriter many([&](std::string_view piece) { text += piece, ++pieces; }, 2);
  many.begin_array("spans");
  constexpr int kSpans = 40000;  // about 3 MB of text
  for (int i = 0; i < kSpans; ++i) many.element({{"begin_ns", i}, {"name", std::string(30, 'x')}});
  many.end_array();
  EXPECT_GE(pieces, 2U) << "written before the end";
  many.finish();
  const json back = json::parse(text);
  ASSERT_EQ(back["spans"].size(), static_cast<std::size_t>(kSpans));
  EXPECT_EQ(back["spans"][kSpans - 1]["begin_ns"], kSpans - 1);
}

}  // namespace
}  // namespace tw
