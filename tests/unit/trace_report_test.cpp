// `trace show` on a capture made in memory, and what a capture needs before its
// job starts: the tap's interfaces, the shim and python/ beside the binary, the
// job's environment and the exit code passed on.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "tensorwire/capture/capture_setup.hpp"
#include "tensorwire/capture/trace_report.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/util/temp_dir.hpp"
#include "../support/trace_builders.hpp"

namespace tw {
namespace {

CaptureReading two_messages() {
  ProcessTrace t = test::one_connection();
  t.cmdline = {"python3", "train.py"};
  t.final = true;
  // Two messages of 4 KiB, far more than the gap apart.
  t.io = {test::send(1, 1000, 1500, 0, 4096), test::send(1, 1'000'000, 1'000'300, 4096, 4096)};
  CaptureReading r;
  r.traces = {t};
  r.gap = 100 * kMicro;
  r.analysis = analyse_capture(r.traces, r.gap, nullptr);
  return r;
}

// `trace show --json`'s text, read back. Written as it is made, it is the text
// the report had as one document: json_text of what it reads back as.
nlohmann::json report_json(const CaptureReading& c) {
  std::string text;
  write_trace_report_json(c, [&](std::string_view piece) { text += piece; });
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(text, json_text(j, 2));
  return j;
}

TEST(TraceReport, JsonHasProcessesConnectionsAndMessages) {
  const nlohmann::json j = report_json(two_messages());
  ASSERT_EQ(j["processes"].size(), 1U);
  EXPECT_EQ(j["processes"][0]["pid"], 42);
  EXPECT_EQ(j["wire"]["mode"], "none");
  ASSERT_EQ(j["connections"].size(), 1U);
  EXPECT_EQ(j["connections"][0]["messages"], 2);
  EXPECT_EQ(j["connections"][0]["bytes_sent"], 8192);
  EXPECT_EQ(j["connections"][0]["in_send"]["count"], 2);
  EXPECT_EQ(j["connections"][0]["in_send"]["max_ns"], 500);
  EXPECT_TRUE(j["connections"][0]["queued"].is_null()) << "no wire tap";
  EXPECT_EQ(j["messages"].size(), 2U);
  EXPECT_TRUE(j["spans"].empty());
}

TEST(TraceReport, TextHasTheTablesAndSaysWhatIsUnknown) {
  const std::string t = trace_report_text(two_messages(), {});
  EXPECT_NE(t.find("python3 train.py"), std::string::npos) << t;
  EXPECT_NE(t.find("message timing, p50 / p99 per connection that sent:"), std::string::npos) << t;
  EXPECT_NE(t.find("send calls less than 100.00 us apart"), std::string::npos) << t;
  EXPECT_EQ(t.find("annotated compute"), std::string::npos) << "no annotations";
  EXPECT_EQ(t.find("imported ops"), std::string::npos) << "no import";
  EXPECT_NE(t.find("wire tap: none; queued, wire and ack times are not known.\n"), std::string::npos) << t;
  const std::string with_ops = trace_report_text(two_messages(), {{.pid = 42, .thread = "1", .name = "aten::mm", .category = "cpu_op",
                                                                   .begin = 0, .end = 1000}});
  EXPECT_NE(with_ops.find("aten::mm"), std::string::npos) << with_ops;
}

// A store-like exchange: the receiver's read returns (3 us) before the sender's
// send call does (5 us), as a small send on loopback wakes the reader inside the
// call. "to peer" is measured from the call's entry (1 us): 2 us, not -2 us.
TEST(TraceReport, ToPeerIsNeverNegative) {
  ProcessTrace sender = test::one_connection();
  sender.io = {test::send(1, 1000, 5000, 0, 100)};
  ProcessTrace receiver = test::one_connection();
  receiver.pid = 43;
  receiver.conns[0].local_port = 2000;
  receiver.conns[0].remote_port = 1000;
  receiver.conns[0].how = trace::ConnOrigin::accept;
  trace::Event r = test::send(1, 500, 3000, 0, 100);
  r.kind = trace::Kind::recv;
  r.call = trace::Call::recv;
  receiver.io = {r};
  CaptureReading c;
  c.traces = {sender, receiver};
  c.analysis = analyse_capture(c.traces, c.gap, nullptr);
  ASSERT_EQ(c.analysis.messages.size(), 1U);
  ASSERT_EQ(c.analysis.messages[0].recv_last, 3000) << "the hand-made capture pairs the two ends";
  const nlohmann::json j = report_json(c);
  EXPECT_EQ(j["connections"][0]["to_peer"]["p50_ns"], 2000) << j["connections"][0].dump();
  EXPECT_EQ(j["connections"][0]["to_peer_clamped"], 0);
  // On two hosts' clocks the read may seem to come before the call: 0, counted.
  c.traces[1].io[0].exit_ns = 700;
  c.analysis = analyse_capture(c.traces, c.gap, nullptr);
  const nlohmann::json k = report_json(c);
  EXPECT_EQ(k["connections"][0]["to_peer"]["p50_ns"], 0) << k["connections"][0].dump();
  EXPECT_EQ(k["connections"][0]["to_peer_clamped"], 1);
  EXPECT_NE(trace_report_text(c, {}).find("to peer: last byte on the wire\n(without the wire tap: the send call that moved it entered)"),
            std::string::npos);
}

TEST(TraceReport, ACaptureWithoutTracesIsAnError) {
  const TempDir d("tw-trace-report-test");
  EXPECT_THROW(read_capture(d.path(), 100 * kMicro), std::runtime_error);
}

// The sessions of a directory several captures wrote into are read together; the
// single capture.json of older captures still is.
TEST(TraceReport, EverySessionFileOfADirectoryIsRead) {
  const TempDir d("tw-trace-report-test");
  std::ofstream(d.path() + "/capture.json") << R"({"wire": {"mode": "off"}})";
  EXPECT_EQ(read_wire_capture(d.path()).mode, "off");
  std::ofstream(d.path() + "/capture-h-7.json") << R"({"wire": {"mode": "auto", "error": "no permission"}})";
  const WireCapture w = read_wire_capture(d.path());
  EXPECT_EQ(w.mode, "auto,off") << "in the order of the files' names";
  EXPECT_EQ(w.status, "no permission; no wire tap in this capture (--wire off)");
  std::ofstream(d.path() + "/capture-h-8.json") << R"({"wire": {"mode": "auto", "files": ["wire-any-h-8.pcap"], "interfaces": ["any"]}})";
  try {
    read_wire_capture(d.path());
    ADD_FAILURE() << "a missing wire file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), d.path() + "/wire-any-h-8.pcap: listed in capture-h-8.json but missing");
  }
  EXPECT_EQ(capture_dir::session_files(d.path()).size(), 3U);
}

// A session file names its wire files by their plain names in its directory,
// each once: a forged list naming other files, or one file many times, is refused
// before anything is opened.
TEST(TraceReport, ASessionListsOnlyItsOwnWireFilesOnce) {
  const TempDir d("tw-trace-wire-list-test");
  const auto refused = [&](const std::string& files) -> std::string {
    std::ofstream(d.path() + "/capture-h-9.json") << R"({"wire": {"mode": "auto", "files": )" + files + "}}";
    try {
      read_wire_capture(d.path());
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "read";
  };
  const std::string session = d.path() + "/capture-h-9.json";
  EXPECT_EQ(refused(R"(["../../../../etc/passwd"])"),
            session + ": lists \".._.._.._.._etc_passwd\" among its wire files, which is no wire file's name (wire-*.pcap in the capture directory)");
  EXPECT_NE(refused(R"(["/proc/self/mem"])").find("which is no wire file's name"), std::string::npos);
  EXPECT_NE(refused(R"(["wire-x/../../x.pcap"])").find("which is no wire file's name"), std::string::npos);
  EXPECT_EQ(refused(R"(["wire-a.pcap", "wire-a.pcap"])"), session + ": lists the wire file wire-a.pcap twice");
  EXPECT_EQ(refused(R"([7])"), session + ": 'wire' 'files' must list file names");
  std::string many = "[";
  for (std::size_t i = 0; i <= capture_dir::kMaxWireFiles; ++i) many += (i ? ",\"wire-" : "\"wire-") + std::to_string(i) + ".pcap\"";
  EXPECT_EQ(refused(many + "]"), session + ": lists 1025 wire files, more than 1024");
}

// A trace file cut short (half copied, a full disk) holds fewer events than its
// description counted: the report says it is not complete, and how many are missing.
TEST(TraceReport, ATraceCutShortIsNotComplete) {
  const TempDir d("tw-trace-cut-test");
  const auto header = binary_file::encode_header(trace::kMagic, trace::kVersion, sizeof(trace::Event));
  std::ofstream twt(d.path() + "/trace-42.twt", std::ios::binary);
  twt.write(reinterpret_cast<const char*>(header.data()), header.size());
  for (int i = 0; i < 3; ++i) {
    const trace::Event e = test::send(1, 10 * i, 10 * i + 5, 100 * i, 100);
    twt.write(reinterpret_cast<const char*>(&e), sizeof e);
  }
  twt.close();
  std::ofstream(d.path() + "/trace-42.json") << R"({"pid": 42, "final": true, "events_written": 8})";
  std::vector<ProcessTrace> t = read_capture_dir(d.path());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].event_count(), 3u);
  EXPECT_EQ(t[0].events_missing, 5u);
  std::ofstream(d.path() + "/trace-42.json") << R"({"pid": 42, "final": true, "events_written": 3})";
  EXPECT_EQ(read_capture_dir(d.path())[0].events_missing, 0u);
  std::ofstream(d.path() + "/trace-42.json") << R"({"pid": "42"})";
  try {
    read_capture_dir(d.path());
    ADD_FAILURE() << "a pid that is a string";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), d.path() + "/trace-42.json: 'pid' must be a whole number from 0 to 2147483647, not \"42\"");
  }
  // Events whose description is missing are no process to leave out unsaid; a
  // file of its header alone is a process that has only just started.
  std::filesystem::remove(d.path() + "/trace-42.json");
  try {
    read_capture_dir(d.path());
    ADD_FAILURE() << "events without their description";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), d.path() + "/trace-42.twt: holds events, but its description trace-42.json is missing (copy it with the capture, or remove both)");
  }
  // While a capture runs (its session says no end), the shim may yet write it
  // (it could not for want of a descriptor or space): that process is left out.
  std::ofstream(d.path() + "/capture-h-1.json") << R"({"started_ns": 1})";
  EXPECT_TRUE(read_capture_dir(d.path()).empty());
  std::ofstream(d.path() + "/capture-h-1.json") << R"({"started_ns": 1, "ended_ns": 2})";
  EXPECT_THROW(read_capture_dir(d.path()), std::runtime_error);
  std::filesystem::remove(d.path() + "/capture-h-1.json");
  std::filesystem::resize_file(d.path() + "/trace-42.twt", header.size());
  EXPECT_TRUE(read_capture_dir(d.path()).empty());
}

// What a job wrote about itself is printed by trace show and the tables of
// profile build: its control characters come out escaped, as a run directory's
// strings do (a cmdline could retitle or clear the reader's terminal), and so
// does a session's wire error.
TEST(TraceReport, AJobsOwnTextIsPrintedEscaped) {
  const TempDir d("tw-trace-escape-test");
  const auto header = binary_file::encode_header(trace::kMagic, trace::kVersion, sizeof(trace::Event));
  std::ofstream(d.path() + "/trace-42.twt", std::ios::binary).write(reinterpret_cast<const char*>(header.data()), header.size());
  std::ofstream(d.path() + "/trace-42.json")
      << R"({"pid": 42, "final": true, "host": "h\u001b]2;x\u0007", "cmdline": ["py\u001b[31mRED", "a\nb"], "env": {"RANK": "1\r"}})";
  const std::vector<ProcessTrace> t = read_capture_dir(d.path());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].host, "h\\x1b]2;x\\x07");
  EXPECT_EQ(t[0].cmdline, (std::vector<std::string>{"py\\x1b[31mRED", "a\\x0ab"}));
  EXPECT_EQ(t[0].rank_text(), "rank 1\\x0d");
  std::ofstream(d.path() + "/capture-h-7.json") << R"({"wire": {"mode": "auto", "error": "no\u001b[2J permission"}})";
  EXPECT_EQ(read_wire_capture(d.path()).status, "no\\x1b[2J permission");
}

// Event times a job's calls could have: with a session file, none more than an
// hour before it started or an hour after they are read (a job's daemons outlive
// the capture), and no call returning much before it was entered. A damaged event
// (entered at 0, returned at INT64_MAX) made every duration nonsense.
TEST(TraceReport, EventTimesOutsideTheCaptureAreRefused) {
  const TempDir d("tw-trace-times-test");
  const auto write = [&](const std::vector<trace::Event>& events) {
    const auto header = binary_file::encode_header(trace::kMagic, trace::kVersion, sizeof(trace::Event));
    std::ofstream twt(d.path() + "/trace-42.twt", std::ios::binary | std::ios::trunc);
    twt.write(reinterpret_cast<const char*>(header.data()), header.size());
    for (const auto& e : events) twt.write(reinterpret_cast<const char*>(&e), sizeof e);
  };
  const auto refused = [&]() -> std::string {
    try {
      read_capture_dir(d.path());
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "read";
  };
  constexpr Nanos kHour = 3600'000'000'000;
  std::ofstream(d.path() + "/trace-42.json") << R"({"pid": 42, "final": true, "events_written": 2})";
  const std::string twt = d.path() + "/trace-42.twt";
  write({test::send(1, 10, 15, 0, 100), test::send(1, 2 * kHour, kHour - 1, 100, 100)});
  EXPECT_EQ(refused(), twt + ": event 2: a call that returned 3600000000001 ns before it was entered");
  // A realtime clock stepped back while the call blocked: it took no time we know of.
  write({test::send(1, 10, 15, 0, 100), test::send(1, 2 * kSecond, kSecond, 100, 100)});
  ASSERT_EQ(refused(), "read") << "no session: any time from 0";
  EXPECT_EQ(read_capture_dir(d.path())[0].io[1].exit_ns, 2 * kSecond);

  const Nanos start = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count() - 10 * kSecond;
  std::ofstream(d.path() + "/capture.json") << R"({"started_ns": )" << start << R"(, "ended_ns": )" << start + kSecond << "}";
  std::ofstream(d.path() + "/capture-other-7.json") << "";  // claimed by a capture sharing the directory, not yet written
  write({test::send(1, start + 10, start + 15, 0, 100), test::send(1, start - kHour + 1, start, 100, 100)});
  EXPECT_EQ(refused(), "read") << "within an hour before the start";
  write({test::send(1, start + 10, start + 15, 0, 100), test::send(1, start + 5 * kSecond, start + 8 * kSecond, 100, 100)});
  EXPECT_EQ(refused(), "read") << "after the session ended: a process that outlived the capture";
  write({test::send(1, start + 10, start + 15, 0, 100), test::send(1, 0, INT64_MAX, 100, 100)});
  EXPECT_EQ(refused(), twt + ": event 2: a time of 0 ns, not from an hour before the capture started to an hour from now");
  write({test::send(1, start, start + 2 * kHour, 0, 100)});
  EXPECT_NE(refused().find(twt + ": event 1: a time of "), std::string::npos);
  trace::MarkEvent m{};
  m.kind = trace::Kind::mark;
  m.phase = 'I';
  m.at_ns = -5;
  trace::Event as_event{};
  std::memcpy(&as_event, &m, sizeof m);
  write({as_event});
  EXPECT_EQ(refused(), twt + ": event 1: a time of -5 ns, not from an hour before the capture started to an hour from now");
  // A session that does not say when it started bounds nothing.
  std::ofstream(d.path() + "/capture.json") << R"({"started_ns": "soon"})";
  write({test::send(1, 10, 15, 0, 100)});
  EXPECT_EQ(refused(), "read");
}

// A wire file's frames are held to the same span as the events, on the clock of
// the host that took them: a record stamped 0xffffffff s (the year 2106) made a
// message queue for 79 years in `trace show`.
TEST(TraceReport, WireFramesOutsideTheCaptureAreRefused) {
  const TempDir d("tw-trace-wire-times-test");
  const std::string wire = d.path() + "/wire-any-h-1.pcap";
  // A nanosecond pcap of one Ethernet frame of 14 bytes (no TCP: counted, not indexed).
  const auto write = [&](std::uint32_t second) {
    const std::uint32_t header[10] = {0xa1b23c4d, 2 | 4 << 16, 0, 0, 160, 1, second, 0, 14, 14};
    std::ofstream out(wire, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out << std::string(14, '\0');
  };
  const Nanos start = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count() - 10 * kSecond;
  std::ofstream(d.path() + "/capture.json")
      << R"({"started_ns": )" << start << R"(, "wire": {"mode": "auto", "files": ["wire-any-h-1.pcap"], "interfaces": ["any"]}})";
  write(static_cast<std::uint32_t>(start / kSecond));
  EXPECT_EQ(read_wire_capture(d.path()).frames, 1U);
  write(0xffffffff);
  try {
    read_wire_capture(d.path());
    ADD_FAILURE() << "a frame in 2106";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              wire + ": record 1: a time of 4294967295000000000 ns, not from an hour before the capture started to an hour from now");
  }
  std::ofstream(d.path() + "/capture.json") << R"({"wire": {"mode": "auto", "files": ["wire-any-h-1.pcap"], "interfaces": ["any"]}})";
  EXPECT_EQ(read_wire_capture(d.path()).frames, 1U) << "a session that does not say when it started bounds nothing";
}

TEST(CaptureSetup, WireOptionNamesTheInterfaces) {
  EXPECT_EQ(tap_interfaces("auto"), std::vector<std::string>{"any"});
  EXPECT_TRUE(tap_interfaces("off").empty());
  EXPECT_EQ(tap_interfaces("lo,,eth0"), (std::vector<std::string>{"lo", "eth0"}));
  EXPECT_THROW(tap_interfaces(","), std::invalid_argument);
}

TEST(CaptureSetup, FindsTheShimAndPythonBesideTheBinary) {
  const TempDir d("tw-capture-setup-test");
  const std::filesystem::path root = d.path();
  std::filesystem::create_directories(root / "build/cli");
  std::filesystem::create_directories(root / "build/capture");
  std::filesystem::create_directories(root / "python/tensorwire");
  const std::string exe_dir = (root / "build/cli").string();
  EXPECT_THROW(find_capture_shim(exe_dir), std::runtime_error);
  EXPECT_EQ(find_python_dir(exe_dir), "") << "no annotate.py yet";
  std::ofstream(root / "build/capture/libtensorwire_capture.so") << "";
  std::ofstream(root / "python/tensorwire/annotate.py") << "";
  EXPECT_EQ(find_capture_shim(exe_dir), std::filesystem::canonical(root / "build/capture/libtensorwire_capture.so").string());
  EXPECT_EQ(find_python_dir(exe_dir), std::filesystem::canonical(root / "python").string());
}

// A build outside the source tree: python/ is found in BUILD/python, where the build copies it.
TEST(CaptureSetup, FindsPythonBesideAnOutOfTreeBuild) {
  const TempDir d("tw-capture-setup-test");
  const std::filesystem::path root = d.path();
  std::filesystem::create_directories(root / "b/cli");
  std::filesystem::create_directories(root / "b/python/tensorwire");
  std::ofstream(root / "b/python/tensorwire/annotate.py") << "";
  EXPECT_EQ(find_python_dir((root / "b/cli").string()), std::filesystem::canonical(root / "b/python").string());
}

// A directory that holds any capture's file is refused without --append.
TEST(CaptureSetup, AUsedDirectoryIsFound) {
  const TempDir d("tw-capture-setup-test");
  EXPECT_EQ(existing_capture_file(d.path()), "");
  EXPECT_EQ(existing_capture_file(d.path() + "/missing"), "");
  std::ofstream(d.path() + "/notes.txt") << "";
  EXPECT_EQ(existing_capture_file(d.path()), "") << "not a capture's file";
  std::ofstream(d.path() + "/wire-any-h-1.pcap") << "";
  EXPECT_EQ(existing_capture_file(d.path()), "wire-any-h-1.pcap");
  std::ofstream(d.path() + "/capture.json") << "";
  EXPECT_EQ(existing_capture_file(d.path()), "capture.json");
}

TEST(CaptureSetup, TheJobsEnvironmentAndExitCode) {
  EXPECT_EQ(capture_environment("/s.so", "/d", "", nullptr, "/x"),
            (std::vector<std::string>{"LD_PRELOAD=/s.so", "TW_CAPTURE_DIR=/d"}));
  EXPECT_EQ(capture_environment("/s.so", "/d", "/py", "/other.so", "/x"),
            (std::vector<std::string>{"LD_PRELOAD=/s.so:/other.so", "TW_CAPTURE_DIR=/d", "PYTHONPATH=/py:/x"}));
  EXPECT_EQ(capture_environment("/s.so", "/d", "/py", "", ""),
            (std::vector<std::string>{"LD_PRELOAD=/s.so", "TW_CAPTURE_DIR=/d", "PYTHONPATH=/py"}));
  EXPECT_EQ(capture_environment("/s.so", "/d", "", "", "", false),
            (std::vector<std::string>{"LD_PRELOAD=/s.so", "TW_CAPTURE_DIR=/d", "TW_CAPTURE_SAMPLES=0"}));
  EXPECT_EQ(exit_code_of(3 << 8), 3);
  EXPECT_EQ(exit_code_of(SIGKILL), 128 + SIGKILL);
}

}  // namespace
}  // namespace tw
