// `tensorwire results check`: verify a finished replay from its records;
// `tensorwire results rates`: goodput at the receivers, per flow and per rank.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "tensorwire/analysis/rates.hpp"
#include "tensorwire/analysis/run_check.hpp"
#include "tensorwire/analysis/sources.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/executor.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/core/text_table.hpp"
#include "tensorwire/launch/local_replay.hpp"

namespace tw::cli {
namespace {

int run_check_command(const std::string& dir, std::string profile_path) {
  const nlohmann::json first = read_agent_summary(dir, 0);
  const Profile p = profile_path.empty() ? load_run_profile(dir) : load_profile_or_throw(profile_path);
  RunCheckOptions o;
  o.iterations = first.value("iterations", std::uint64_t{0});
  o.open_loop = first.contains("options") && first["options"].value("open_loop", false);
  // Agents that did not spin set their timers early by their usual wake-up delay.
  if (first.contains("options") && first["options"].value("spin_ns", Nanos{0}) == 0) o.own_rank_tolerance = kMaxTimerLead;
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const nlohmann::json s = read_agent_summary(dir, static_cast<RankId>(r));
    if (!s.value("finished", false)) {
      fmt::print(stderr, "{}: rank {} did not finish: {}\n", dir, r, s.value("error", "no reason recorded"));
      return 1;
    }
    // Results merged from several clocks are only as aligned as the clock sync.
    if (s.contains("clock") && s["clock"].contains("bound_ns")) {
      o.cross_rank_tolerance = std::max(o.cross_rank_tolerance, 50 * kMicro + 2 * s["clock"]["bound_ns"].get<Nanos>());
    }
  }
  const auto records = load_run_records(dir, p);
  // The count the summary gives is checked against the records (whose iterations
  // the file bounds) before anything loops over it; more than it gives the loader
  // has refused already.
  const auto finished = static_cast<std::uint64_t>(std::count_if(records[0].begin(), records[0].end(), [](const Record& r) { return r.is(RecordKind::iteration); }));
  if (o.iterations > finished) {
    fmt::print(stderr, "{}: 'iterations' is {}, but the records of rank 0 hold {}\n", run_dir::summary_file(dir, 0), o.iterations, finished);
    return 1;
  }
  const RunCheck c = check_run(p, records, o);
  for (const auto& problem : c.problems) fmt::print(stderr, "{}: {}\n", dir, problem);
  if (!c.problems.empty()) return 1;
  fmt::print("{}: ok: {} messages ({:.1f} MB) of {} iterations delivered whole, {} dependencies honoured\n", dir,
             c.messages, static_cast<double>(c.bytes) / 1e6, o.iterations, c.dependencies_checked);
  return 0;
}

int rates_command(const std::string& dir, bool json) {
  const Profile p = load_run_profile(dir);
  const KeptRecords kept = load_kept_run_records(dir, p);
  const ReceiveRates rates = receive_rates(p, kept.ranks);
  const auto row = [](const ReceiveRate& r) {
    return nlohmann::json{{"messages", r.messages},         {"bytes", r.bytes},
                          {"first_ns", r.first},            {"last_ns", r.last},
                          {"bits_per_second", r.bits_per_second()}, {"messages_per_second", r.messages_per_second()}};
  };
  if (json) {
    nlohmann::json j = {{"flows", nlohmann::json::array()}, {"ranks", nlohmann::json::array()}};
    for (std::size_t f = 0; f < p.flows.size(); ++f) {
      nlohmann::json x = row(rates.flows[f]);
      x["flow"] = p.flows[f].id;
      x["src"] = p.flows[f].src;
      x["dst"] = p.flows[f].dst;
      j["flows"].push_back(std::move(x));
    }
    for (std::size_t r = 0; r < p.ranks.size(); ++r) {
      nlohmann::json x = row(rates.ranks[r]);
      x["rank"] = r;
      j["ranks"].push_back(std::move(x));
    }
    if (!kept.failure.empty()) {
      j["failure"] = kept.failure;
      j["missing_ranks"] = kept.missing;
    }
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  const auto mbps = [](const ReceiveRate& r) { return fmt::format("{:.1f}", r.bits_per_second() / 1e6); };
  TextTable t({"flow", "src", "dst", "messages", "bytes", "Mb/s", "messages/s"});
  for (std::size_t f = 0; f < p.flows.size(); ++f) {
    const ReceiveRate& r = rates.flows[f];
    if (r.messages == 0) continue;
    t.add({p.flows[f].id, std::to_string(p.flows[f].src), std::to_string(p.flows[f].dst), std::to_string(r.messages),
           human_bytes(r.bytes), mbps(r), fmt::format("{:.0f}", r.messages_per_second())});
  }
  TextTable k({"rank", "messages", "bytes", "Mb/s", "messages/s"});
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const ReceiveRate& x = rates.ranks[r];
    if (x.messages == 0) continue;
    k.add({std::to_string(r), std::to_string(x.messages), human_bytes(x.bytes), mbps(x), fmt::format("{:.0f}", x.messages_per_second())});
  }
  fmt::print("received per flow:\n{}\nreceived per rank (all its flows):\n{}", t.str(), k.str());
  fmt::print("rates: bytes delivered from the first byte of the first message to the last byte of the last one\n");
  if (!kept.failure.empty()) {
    fmt::print("the run failed ({}): these are the rates until then", kept.failure);
    for (const RankId r : kept.missing) fmt::print("; rank {} sent no records", r);
    fmt::print("\n");
  }
  return 0;
}

}  // namespace

void add_results_command(CLI::App& app, Action& action) {
  CLI::App* results = app.add_subcommand("results", "Inspect the results of a replay");
  results->require_subcommand(0, 1);
  struct Args {
    std::string dir;
    std::string profile;
  };
  auto args = std::make_shared<Args>();
  CLI::App* check = results->add_subcommand(
      "check", "Verify a replay from its records: every message sent and received whole, every dependency honoured");
  check->add_option("dir", args->dir, "The --out directory of a replay")->required();
  check->add_option("--profile", args->profile, "The profile replayed (default: the one named in the results)");
  check->callback([&action, args] { action = [args] { return run_check_command(args->dir, args->profile); }; });
  struct RatesArgs {
    std::string dir;
    bool json = false;
  };
  auto ra = std::make_shared<RatesArgs>();
  CLI::App* rates = results->add_subcommand("rates", "Goodput at the receivers of a replay, per flow and per receiving rank");
  rates->add_option("dir", ra->dir, "The --out directory of a replay or run")->required();
  rates->add_flag("--json", ra->json, "Machine-readable output");
  rates->callback([&action, ra] { action = [ra] { return rates_command(ra->dir, ra->json); }; });
}

}  // namespace tw::cli
