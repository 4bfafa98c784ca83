#include "tensorwire/protocol/control_messages.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

template <typename T>
T agent_round_trip(const T& m) {
  const auto d = decode_agent_message(encode(AgentMessage{m}));
  EXPECT_TRUE(d) << d.error;
  return std::get<T>(*d.message);
}

template <typename T>
T controller_round_trip(const T& m) {
  const auto d = decode_controller_message(encode(ControllerMessage{m}));
  EXPECT_TRUE(d) << d.error;
  return std::get<T>(*d.message);
}

TEST(ControlMessages, AgentMessagesRoundTrip) {
  control::Hello h;
  h.host = "node1";
  h.pid = 4242;
  h.data_host = "10.0.0.1";
  h.data_port = 17000;
  h.rank_hint = 3;
  EXPECT_EQ(agent_round_trip(h), h);
  h.rank_hint.reset();
  EXPECT_EQ(agent_round_trip(h), h);
  EXPECT_EQ(agent_round_trip(control::Connected{}), control::Connected{});
  EXPECT_EQ(agent_round_trip(control::Pong{7, 1'700'000'000'000'000'000}), (control::Pong{7, 1'700'000'000'000'000'000}));
  control::Progress p{{{0, 10, 20}, {1, 20, 35}}, {{0, 100}, {2, 1 << 30}}};
  EXPECT_EQ(agent_round_trip(p), p);
  EXPECT_EQ(agent_round_trip(control::Done{true, ""}), (control::Done{true, ""}));
  EXPECT_EQ(agent_round_trip(control::Done{false, "rank 1: peer closed"}), (control::Done{false, "rank 1: peer closed"}));
  EXPECT_EQ(agent_round_trip(control::FileBegin{"rank-0.twr", 80}), (control::FileBegin{"rank-0.twr", 80}));
  EXPECT_EQ(agent_round_trip(control::Uploaded{}), control::Uploaded{});
}

TEST(ControlMessages, ControllerMessagesRoundTrip) {
  control::Setup s;
  s.run = "run-1";
  s.rank = 1;
  s.profile = "ranks: 2\n";
  s.ops = {{0, 3}, {7, 2}};
  s.profile_ops = 10;
  s.flows = {{1, 2}};
  s.profile_flows = 4;
  s.profile_digest = 0xfedcba9876543210ULL;  // beyond int64: an unsigned JSON number
  s.roster = {{0, "127.0.0.1", 1000}, {1, "127.0.0.1", 1001}};
  s.settings.iterations = 5;
  s.settings.open_loop = true;
  s.settings.open_loop_offsets = {0, 10};
  s.settings.open_loop_period = 100;
  s.slowdown = 1.5;
  s.delay_from = {{0, 500}, {3, 7}};
  s.data_token = "data-plane-token";
  EXPECT_EQ(controller_round_trip(s), s);
  EXPECT_EQ(controller_round_trip(control::Ping{9}), control::Ping{9});
  EXPECT_EQ(controller_round_trip(control::Start{123}), control::Start{123});
  EXPECT_EQ(controller_round_trip(control::Stop{"rank 2 died"}), control::Stop{"rank 2 died"});
  EXPECT_EQ(controller_round_trip(control::Bye{}), control::Bye{});
}

// The bytes on the wire are docs/protocol.md's.
TEST(ControlMessages, WireFormatIsTheDocumentedOne) {
  EXPECT_EQ(nlohmann::json::parse(encode(AgentMessage{control::Pong{3, 44}})), (nlohmann::json{{"type", "pong"}, {"seq", 3}, {"t", 44}}));
  EXPECT_EQ(nlohmann::json::parse(encode(ControllerMessage{control::Stop{"x"}})), (nlohmann::json{{"type", "stop"}, {"reason", "x"}}));
  EXPECT_EQ(nlohmann::json::parse(encode(AgentMessage{control::Progress{{{2, 5, 6}}, {{1, 9}}}})),
            (nlohmann::json{{"type", "progress"}, {"iterations", {{2, 5, 6}}}, {"flows", {{1, 9}}}}));
  EXPECT_EQ(nlohmann::json::parse(encode(AgentMessage{control::FileBegin{"rank-1.json", 12}})),
            (nlohmann::json{{"type", "file"}, {"name", "rank-1.json"}, {"size", 12}}));
  const auto hello = nlohmann::json::parse(encode(AgentMessage{control::Hello{1, "h", 5, "10.0.0.2", 80, std::nullopt}}));
  EXPECT_EQ(hello, (nlohmann::json{{"type", "hello"}, {"version", 1}, {"host", "h"}, {"pid", 5}, {"data_host", "10.0.0.2"}, {"data_port", 80}}));
}

TEST(ControlMessages, OptionalFieldsTakeTheirDefaults) {
  const auto d = decode_agent_message(R"({"type":"hello","data_host":"a","data_port":1})");
  ASSERT_TRUE(d) << d.error;
  const auto& h = std::get<control::Hello>(*d.message);
  EXPECT_EQ(h.version, 0);  // a controller refuses it, naming the version
  EXPECT_EQ(h.host, "?");
  EXPECT_FALSE(h.rank_hint);
  const auto s = decode_controller_message(R"({"type":"stop"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(std::get<control::Stop>(*s.message).reason, "no reason given");
}

TEST(ControlMessages, MalformedMessagesGiveOneLineReasons) {
  const auto agent_error = [](const char* text) { return decode_agent_message(text).error; };
  EXPECT_EQ(agent_error("not json"), "a control message that is not JSON");
  EXPECT_EQ(agent_error("[1, 2]"), "a control message without a \"type\"");
  EXPECT_EQ(agent_error(R"({"type": 3})"), "a control message without a \"type\"");
  EXPECT_EQ(agent_error(R"({"type":"teleport"})"), "an unknown message \"teleport\"");
  EXPECT_EQ(agent_error(R"({"type":"ping","seq":1})"), "an unknown message \"ping\"");  // a controller's message
  EXPECT_EQ(agent_error(R"({"type":"pong","seq":1})"), "a \"pong\" whose \"t\" is missing");
  EXPECT_EQ(agent_error(R"({"type":"pong","seq":1,"t":"soon"})"), "a \"pong\" whose \"t\" has the wrong type");
  EXPECT_EQ(agent_error(R"({"type":"hello","data_host":"a","data_port":70000})"), "a \"hello\" whose \"data_port\" is not a port");
  EXPECT_EQ(agent_error(R"({"type":"progress","iterations":[[1,2]],"flows":[]})"),
            "a \"progress\" with \"iterations\" that are not [[index, start, end], ...]");
  EXPECT_EQ(agent_error(R"({"type":"file","name":"x"})"), "a \"file\" whose \"size\" is missing");
  // Numbers are taken only as what they must be: found by control_fuzz, a float
  // beyond an integer's range was converted (undefined behaviour).
  EXPECT_EQ(agent_error(R"({"type":"file","name":"x","size":37777777777777777777777777777777764})"),
            "a \"file\" whose \"size\" has the wrong type");
  EXPECT_EQ(agent_error(R"({"type":"file","name":"x","size":1.5})"), "a \"file\" whose \"size\" has the wrong type");
  EXPECT_EQ(agent_error(R"({"type":"file","name":"x","size":-1})"), "a \"file\" whose \"size\" has the wrong type");
  EXPECT_EQ(agent_error(R"({"type":"hello","data_host":"a","data_port":1,"rank_hint":4294967296})"),
            "a \"hello\" whose \"rank_hint\" has the wrong type");
  EXPECT_EQ(agent_error(R"({"type":"progress","iterations":[[1,2,3.5]],"flows":[]})"),
            "a \"progress\" with \"iterations\" that are not [[index, start, end], ...]");
  EXPECT_EQ(agent_error(R"({"type":"progress","iterations":[],"flows":[[-1,2]]})"),
            "a \"progress\" with \"flows\" that are not [[flow, bytes], ...]");
  const auto setup = decode_controller_message(
      R"({"type":"setup","run":"r","rank":0,"profile":"","ops":[],"profile_ops":0,"flows":[],"profile_flows":0,"profile_digest":0,"roster":[],"settings":{}})");
  EXPECT_FALSE(setup);
  EXPECT_EQ(setup.error, "a \"setup\" with bad settings: missing \"iterations\"");
  control::Setup sound;
  sound.data_token = "t";
  nlohmann::json long_token = nlohmann::json::parse(encode(ControllerMessage{sound}));
  ASSERT_TRUE(decode_controller_message(long_token.dump()));
  long_token["data_token"] = std::string(257, 'x');
  EXPECT_EQ(decode_controller_message(long_token.dump()).error, "a \"setup\" with a \"data_token\" longer than 256 bytes");
  for (const char* runs : {R"([[1]])", R"([[1,-2]])", R"({"a":1})", R"([[0.5,1]])"}) {
    nlohmann::json bad_ops = nlohmann::json::parse(encode(ControllerMessage{sound}));
    bad_ops["ops"] = nlohmann::json::parse(runs);
    EXPECT_EQ(decode_controller_message(bad_ops.dump()).error, "a \"setup\" with \"ops\" that are not [[first, count], ...]") << runs;
    nlohmann::json bad_flows = nlohmann::json::parse(encode(ControllerMessage{sound}));
    bad_flows["flows"] = nlohmann::json::parse(runs);
    EXPECT_EQ(decode_controller_message(bad_flows.dump()).error, "a \"setup\" with \"flows\" that are not [[first, count], ...]") << runs;
  }
  for (const char* delays : {R"([0, 500])", R"([[1,2,3]])", R"([[-1,5]])", R"([[4294967296,5]])"}) {
    nlohmann::json bad = nlohmann::json::parse(encode(ControllerMessage{sound}));
    bad["delay_from_ns"] = nlohmann::json::parse(delays);
    EXPECT_EQ(decode_controller_message(bad.dump()).error,
              "a \"setup\" with \"delay_from_ns\" that are not [[source rank, ns], ...]") << delays;
  }
  long_token.erase("data_token");  // a version-1 controller's
  EXPECT_EQ(decode_controller_message(long_token.dump()).error, "a \"setup\" whose \"data_token\" is missing");
  EXPECT_EQ(decode_controller_message(R"({"type":"start"})").error, "a \"start\" whose \"at\" is missing");
  for (const char* text : {"", "{", R"({"type":"hello"})", R"({"type":"done","ok":"yes"})"}) {
    const auto d = decode_agent_message(text);
    EXPECT_FALSE(d) << text;
    EXPECT_FALSE(d.error.empty()) << text;
    EXPECT_EQ(d.error.find('\n'), std::string::npos) << text;
  }
}

// A setup lists the rank and its flows' peers only; the agent files them by rank
// and refuses a roster that leaves one of its flows without an address.
TEST(Roster, ASetupsEntriesAreFiledByRankAndCoverEveryFlow) {
  ProfileLoad l = load_profile_text(
      "version: 1\niterations: 1\nranks: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]\n"
      "flows: [{id: a, src: 1, dst: 2}, {id: b, src: 3, dst: 1}]\nops:\n  - {id: s, type: send, flow: a, bytes: 1}\n",
      "slice.yaml");
  ASSERT_TRUE(l.ok());
  const Profile& p = *l.profile;
  const Roster r = roster_by_rank({{3, "10.0.0.4", 4}, {1, "10.0.0.2", 2}, {2, "10.0.0.3", 3}}, p, 1, "tok");
  ASSERT_EQ(r.ranks.size(), 4u);
  EXPECT_EQ(r.token, "tok");
  for (std::uint32_t i = 0; i < 4; ++i) EXPECT_EQ(r.ranks[i].rank, i);
  EXPECT_EQ(r.ranks[0].host, "");
  EXPECT_EQ(r.ranks[2].host, "10.0.0.3");
  EXPECT_EQ(r.ranks[3].port, 4);
  const auto error = [&](const std::vector<RosterEntry>& entries) -> std::string {
    try {
      roster_by_rank(entries, p, 1, "");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error({{1, "h", 2}, {2, "h", 3}}), "the roster has no address for rank 3");
  EXPECT_EQ(error({{3, "h", 4}, {2, "h", 3}}), "the roster has no address for rank 1");
  EXPECT_EQ(error({{1, "h", 2}, {2, "h", 3}, {3, "h", 4}, {2, "h", 3}}), "the roster lists rank 2 twice");
  EXPECT_EQ(error({{1, "h", 2}, {2, "h", 3}, {3, "h", 4}, {4, "h", 5}}), "the roster lists rank 4, beyond the profile's 4 ranks");
}

// An agent started by hand shares its machine with the roster's ranks on its
// host: every loopback address is one host.
TEST(Roster, RanksOnAHostCountLoopbackAsOne) {
  Roster r;
  r.ranks = {{0, "127.0.0.1", 1}, {1, "localhost", 2}, {2, "10.0.0.2", 3}, {3, "10.0.0.2", 4}, {4, "::1", 5}, {5, "", 0}};
  EXPECT_EQ(ranks_on_host(r, 0), 3U);
  EXPECT_EQ(ranks_on_host(r, 1), 3U);
  EXPECT_EQ(ranks_on_host(r, 4), 3U);
  EXPECT_EQ(ranks_on_host(r, 2), 2U);
  EXPECT_EQ(ranks_on_host(r, 5), 1U) << "no address: alone";
  EXPECT_EQ(ranks_on_host(r, 6), 1U) << "not listed: alone";
  r.ranks[3].host = "10.0.0.20";
  EXPECT_EQ(ranks_on_host(r, 2), 1U) << "a prefix is another host";
  r.ranks[1].host = "127.example.com";  // a name, not a loopback address
  EXPECT_EQ(ranks_on_host(r, 0), 2U);
  r.ranks[1].host = "127.0.1.1";  // Debian's name for its own host: loopback too
  EXPECT_EQ(ranks_on_host(r, 0), 3U);
}

}  // namespace
}  // namespace tw
