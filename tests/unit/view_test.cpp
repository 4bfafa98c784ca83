// The drawn model of `tensorwire view`: lanes keep messages in flight apart,
// stages nest inside their message, check() refuses what Perfetto would misdraw,
// flows that would run backwards are counted instead of written, the JSON file
// nests and pairs its flows, and two views side by side keep their own tracks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "../../view/src/draw.hpp"
#include "tensorwire/view/report.hpp"
#include "tensorwire/view/sources.hpp"
#include "tensorwire/view/view.hpp"

namespace tw::view {
namespace {

TEST(View, MessagesInFlightAtOnceGoToSeparateLanesThatAreReusedWhenFree) {
  View v;
  const std::uint64_t p = v.add_process(1, "rank 0");
  const std::uint32_t g = v.add_track(p, "to rank 1", TrackKind::group);
  Lanes lanes(v, v.tracks[g].uuid, "to rank 1");
  const std::uint32_t a = lanes.place(0, 100);
  const std::uint32_t b = lanes.place(50, 150);   // overlaps a
  const std::uint32_t c = lanes.place(100, 120);  // a is free again at 100
  EXPECT_NE(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(lanes.count(), 2u);
  EXPECT_EQ(v.tracks[a].parent, v.tracks[g].uuid);
}

TEST(View, StagesNestInsideTheirMessageEvenWhenTheTapTimesRunBackwards) {
  View v;
  const std::uint64_t p = v.add_process(1, "rank 0");
  Lanes lanes(v, p, "to rank 1");
  // The first byte seen on the wire before the call was entered (clock
  // granularity), and the ACK before the last byte: clamped into order.
  const SliceRef m = draw::message(v, lanes, {1000, 1500, 900, 3000, 2500}, v.intern("1 MiB"), v.intern("message"));
  const auto& s = v.tracks[m.track].slices;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].begin, 1000);
  EXPECT_EQ(s[0].end, 3000);
  for (std::size_t i = 1; i < s.size(); ++i) {
    EXPECT_EQ(s[i].depth, 1u);
    EXPECT_GE(s[i].begin, s[i - 1].depth ? s[i - 1].end : s[0].begin);
    EXPECT_LE(s[i].end, s[0].end);
  }
  EXPECT_EQ(v.strings[s[1].name], "queued in stack");
  EXPECT_EQ(check(v), "");
  // Without the wire tap a message is the call alone.
  const SliceRef q = draw::message(v, lanes, {4000, 4100, -1, -1, -1}, v.intern("2 KiB"), 0);
  EXPECT_EQ(v.tracks[q.track].slices.size(), q.slice + 1u);
}

TEST(View, CheckRefusesOverlappingSiblingsChildrenOutsideTheirParentAndBadFlows) {
  const auto with = [](auto edit) {
    View v;
    const std::uint64_t p = v.add_process(1, "p");
    const std::uint32_t t = v.add_track(p, "t", TrackKind::slices);
    v.add_slice(t, 0, 100, v.intern("a"));
    edit(v, t);
    return check(v);
  };
  EXPECT_EQ(with([](View& v, std::uint32_t t) { v.add_slice(t, 10, 20, v.intern("child"), 1); }), "");
  EXPECT_NE(with([](View& v, std::uint32_t t) { v.add_slice(t, 50, 150, v.intern("b")); }).find("overlaps"), std::string::npos);
  EXPECT_NE(with([](View& v, std::uint32_t t) { v.add_slice(t, 90, 110, v.intern("c"), 1); }).find("outside its parent"), std::string::npos);
  EXPECT_NE(with([](View& v, std::uint32_t t) { v.add_slice(t, 10, 20, v.intern("c"), 2); }).find("without a parent"), std::string::npos);
  EXPECT_NE(with([](View& v, std::uint32_t) { v.flows.push_back({{0, 0}, {0, 7}}); }).find("names no slice"), std::string::npos);
  View bad;
  const std::uint32_t t = bad.add_track(bad.add_process(1, "p"), "t", TrackKind::slices);
  bad.add_slice(t, 0, 100, bad.intern("a"));
  bad.add_slice(t, 50, 60, bad.intern("b"));
  std::ostringstream out;
  EXPECT_THROW(write_perfetto(bad, out), std::logic_error);
  EXPECT_THROW(write_trace_json(bad, out), std::logic_error);
}

TEST(View, AFlowWhoseEndPrecedesItsStartIsCountedNotDrawn) {
  View v;
  const std::uint64_t p = v.add_process(1, "p");
  const std::uint32_t a = v.add_track(p, "send", TrackKind::slices), b = v.add_track(p, "read", TrackKind::slices);
  const SliceRef send = v.add_slice(a, 1000, 2000, v.intern("send"));
  const SliceRef early = v.add_slice(b, 900, 950, v.intern("read"));   // ends 50 ns before the send began
  const SliceRef late = v.add_slice(b, 1500, 2100, v.intern("read"));  // begins before the send ends: drawn
  const SliceRef touching = v.add_slice(b, 2200, 2300, v.intern("read"));
  EXPECT_FALSE(v.link(send, early));
  EXPECT_TRUE(v.link(send, late));
  // An end at the very instant the source begins: a viewer may meet it first.
  const SliceRef before = v.add_slice(a, 2500, 2600, v.intern("send"));
  EXPECT_FALSE(v.link(before, v.add_slice(b, 2400, 2500, v.intern("read"))));
  EXPECT_TRUE(v.link(send, touching));
  ASSERT_EQ(v.flows.size(), 2u);
  EXPECT_EQ(v.flows[0].to.slice, late.slice);
  EXPECT_EQ(v.unlinked, 2u);
  EXPECT_EQ(v.unlinked_by, 50);
}

TEST(View, TheJsonFileNestsOnEveryThreadAndPairsEveryFlow) {
  View v;
  const std::uint64_t p = v.add_process(7, "rank 0 \"quoted\"");
  Lanes lanes(v, p, "to rank 1");
  std::vector<SliceRef> sent;
  for (int i = 0; i < 4; ++i) sent.push_back(draw::message(v, lanes, {i * 100, i * 100 + 50, i * 100 + 60, i * 100 + 250, i * 100 + 300}, v.intern("m"), 0));
  const std::uint32_t r = v.add_track(p, "reads", TrackKind::slices);
  for (int i = 0; i < 4; ++i) v.link(sent[static_cast<std::size_t>(i)], v.add_slice(r, i * 100 + 260, i * 100 + 280, v.intern("read")));
  draw::counter(v, p, "cwnd", "segments", {{0, 10}, {100, 20}});
  std::ostringstream out;
  write_trace_json(v, out);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  std::map<int, std::vector<std::pair<double, double>>> by_tid;
  std::map<int, int> s, f;
  int counters = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") by_tid[e["tid"].get<int>()].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    if (ph == "s") ++s[e["id"].get<int>()];
    if (ph == "f") ++f[e["id"].get<int>()];
    if (ph == "C") ++counters;
    if (ph == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank 0 \"quoted\"");
    }
  }
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s, f);
  EXPECT_EQ(counters, 2);
  // Messages overlap (each lasts 300 ns, one starts every 100): more than one lane thread.
  EXPECT_GE(by_tid.size(), 3u);
  for (auto& [tid, xs] : by_tid) {
    std::sort(xs.begin(), xs.end(), [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;
    for (const auto& [b, e] : xs) {
      while (!open.empty() && open.back() <= b + 1e-9) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e, open.back() + 1e-9) << "tid " << tid;
      }
      open.push_back(e);
    }
  }
  EXPECT_EQ(j["metadata"]["time_zero_ns"], 0);
}

TEST(View, ProtobufIsSmallerCompressedAndNeverEmpty) {
  View v;
  const std::uint64_t p = v.add_process(7, "rank 0");
  Lanes lanes(v, p, "to rank 1");
  for (int i = 0; i < 2000; ++i) {
    const Nanos t = 1'800'000'000'000'000'000 + i * 10'000;
    const SliceRef m = draw::message(v, lanes, {t, t + 2000, t + 2100, t + 5000, t + 7000}, v.intern("1 MiB"), v.intern("message"));
    v.add_arg(m, "bytes", 1 << 20);
  }
  std::ostringstream raw, packed;
  const std::uint64_t a = write_perfetto(v, raw, {.compress = false});
  const std::uint64_t b = write_perfetto(v, packed, {.compress = true});
  EXPECT_EQ(a, raw.str().size());
  EXPECT_EQ(b, packed.str().size());
  EXPECT_LT(b, a);
  // Incremental timestamps and interned names: well under 150 bytes a message
  // with its three stages even before deflating.
  EXPECT_LT(a / 2000, 150u);
}

TEST(View, DownsampleKeepsPeaksAndAtMostOneValuePerBin) {
  std::vector<std::pair<Nanos, double>> s;
  for (int i = 0; i < 1000; ++i) s.emplace_back(i, i == 503 ? 99.0 : 1.0);
  const auto d = downsample(s, 100, true);
  EXPECT_LE(d.size(), 12u);
  EXPECT_TRUE(std::any_of(d.begin(), d.end(), [](const auto& x) { return x.second == 99.0; }));
  EXPECT_EQ(d.back().first, 999);
  const auto t = draw::throughput({{0, 1000, 1000}}, 100);  // 1000 bytes over 1 us: 8 Gb/s
  ASSERT_FALSE(t.empty());
  EXPECT_DOUBLE_EQ(t.front().second, 8e9);
  EXPECT_EQ(t.back().second, 0.0);
}

TEST(View, TwoViewsSideBySideKeepTheirTracksAndStartTogether) {
  const auto one = [](Nanos at, const std::string& name) {
    View v;
    const std::uint32_t t = v.add_track(v.add_process(1, name), "compute", TrackKind::slices);
    const SliceRef a = v.add_slice(t, at, at + 10, v.intern("a"));
    const SliceRef b = v.add_slice(t, at + 20, at + 30, v.intern("b"));
    v.link(a, b);
    return v;
  };
  View v = one(1000, "rank 0");
  append_against(v, "replay", one(5'000'000, "rank 0"), "original");
  ASSERT_EQ(v.processes.size(), 2u);
  EXPECT_EQ(v.processes[0].name, "replay: rank 0");
  EXPECT_EQ(v.processes[1].name, "original: rank 0");
  EXPECT_NE(v.processes[0].uuid, v.processes[1].uuid);
  EXPECT_EQ(v.tracks[1].parent, v.processes[1].uuid);
  EXPECT_EQ(v.tracks[1].slices[0].begin, 1000);
  ASSERT_EQ(v.flows.size(), 2u);
  EXPECT_EQ(v.flows[1].from.track, 1u);
  EXPECT_EQ(check(v), "");
}

TEST(View, SelectionsAreParsedOrRefusedNamingTheOption) {
  EXPECT_EQ(parse_iterations("3:7"), std::make_pair(std::int64_t{3}, std::int64_t{7}));
  EXPECT_EQ(parse_ranks("0,2"), (std::vector<RankId>{0, 2}));
  EXPECT_EQ(parse_flows("0-1,2-0"), (std::vector<std::pair<RankId, RankId>>{{0, 1}, {2, 0}}));
  for (const char* bad : {"7:3", "3", "a:b", "-1:2"}) EXPECT_THROW(parse_iterations(bad), std::invalid_argument) << bad;
  EXPECT_THROW(parse_ranks("0,,1"), std::invalid_argument);
  EXPECT_THROW(parse_flows("0>1"), std::invalid_argument);
  try {
    parse_ranks("x");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--ranks"), std::string::npos);
  }
}

}  // namespace
}  // namespace tw::view

namespace tw::view {
namespace {

TEST(Report, ThePageHoldsEverythingAndTheDataCannotEndItsScript) {
  // Names come from files: a closing tag, an HTML comment opener (which would
  // swallow the rest of the page into the data), a placeholder.
  const nlohmann::json data = {{"sources", {{{"path", "runs/</script><script>alert(1)</script> @DATA@"}, {"label", "<!--<script>"}}}},
                               {"generated", "now"}};
  const std::string page = report_html(data);
  // (The data's own "@DATA@" stays as it is.)
  for (const char* mark : {"@UPLOT_JS@", "@REPORT_JS@", "@UPLOT_CSS@", "@REPORT_CSS@", "@TITLE@"}) {
    EXPECT_EQ(page.find(mark), std::string::npos) << mark;
  }
  // Only the page's own script elements close, and no comment opens: the data's
  // "<", ">" and "&" are \u escapes.
  std::size_t closes = 0;
  for (std::size_t at = page.find("</script>"); at != std::string::npos; at = page.find("</script>", at + 1)) ++closes;
  EXPECT_EQ(closes, 4u);  // uPlot, the shared helpers, the report
  EXPECT_EQ(page.find("<!--<script>"), std::string::npos);
  EXPECT_NE(page.find("\\u003c!--\\u003cscript\\u003e"), std::string::npos);
  // The placeholder in the data is not filled again: the data appears once.
  EXPECT_EQ(page.find("\"generated\":\"now\""), page.rfind("\"generated\":\"now\""));
  // The title is escaped, uPlot is inline, and nothing is fetched.
  EXPECT_NE(page.find("&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("uPlot"), std::string::npos);
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
}

}  // namespace
}  // namespace tw::view
