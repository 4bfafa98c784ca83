// Where one iteration ends and the next begins.
//
// With annotations (python/tensorwire/annotate.py) every rank says so. Without,
// each connection's stream is cut on its own at a byte period (cut_direction).
// The pieces of different connections are then numbered alike from the
// messages between them: a receiver's next send answers what it received, and on
// one rank the sends follow each other. docs/profile-build.md has the details.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>

#include "build_job.hpp"

namespace tw::build {

namespace {

constexpr std::size_t kMaxPeriodCandidates = 4096;  // message starts tried as the period's end
constexpr std::size_t kAnchors = 6;        // idlest messages of the second half tried as an iteration's start
constexpr std::size_t kSampledPeriods = 64;  // multiples of a period checked for a call start
constexpr double kRecurShare = 0.8;
constexpr double kIdleRatio = 2.0;   // a cut's idle gap against the other messages'
constexpr std::size_t kGapSamples = 256;
constexpr std::size_t kMaxParts = 8;  // pieces per iteration a direction may be cut into and joined back
constexpr double kJoinLead = 0.1;     // the agreement by which one way of joining them must beat the next
// A direction whose pieces carry less than 1/kSmallShare of the busiest one's
// bytes is placed by time (below), whatever its period: see find_iterations.
constexpr std::uint64_t kSmallShare = 100;

// With the period p found: the message start, of those in one period from
// `base`, whose multiples of p (from `from` to `last`) mostly start a call and
// were idlest in the median. The anchor `base` was idle once; an iteration's
// start is idle every time (the compute before it), where a rank stalled inside
// the iteration only now and then: with 3 MPI ranks on 2 cores such a stall cut
// one capture's connection 9 messages into each of its iterations.
template <typename HasCall>
std::uint64_t idlest_base(const std::vector<std::uint64_t>& start, const std::vector<Nanos>& gap, const HasCall& has_call,
                          std::uint64_t p, std::uint64_t base, std::uint64_t from, std::uint64_t last) {
  const auto median_idle = [&](std::uint64_t c) -> std::optional<Nanos> {
    const std::uint64_t first = c >= from ? c - (c - from) / p * p : c + (from - c + p - 1) / p * p;
    if (first > last) return std::nullopt;
    const std::uint64_t count = (last - first) / p + 1;
    const std::uint64_t step = std::max<std::uint64_t>(1, count / kSampledPeriods);
    std::size_t tried = 0;
    std::vector<Nanos> idle;
    for (std::uint64_t o = first; o <= last; o += step * p) {
      ++tried;
      if (!has_call(o)) continue;
      idle.push_back(gap[static_cast<std::size_t>(std::lower_bound(start.begin(), start.end(), o) - start.begin())]);
    }
    if (static_cast<double>(idle.size()) < kRecurShare * static_cast<double>(tried)) return std::nullopt;
    return upper_median(std::move(idle));
  };
  std::uint64_t chosen = base;
  std::optional<Nanos> best = median_idle(base);
  const auto at = std::lower_bound(start.begin(), start.end(), base);
  for (auto i = at; i != start.end() && *i < base + p && i - at < static_cast<std::ptrdiff_t>(kMaxPeriodCandidates); ++i) {
    if (*i == base || (i != at && *i == *(i - 1))) continue;
    const auto m = median_idle(*i);
    if (m && (!best || *m > *best)) best = m, chosen = *i;
  }
  return chosen;
}

// Per message of one direction (stream order): its piece, or kNoIteration before
// the steady part; empty when the stream shows no period.
//
// The invariant used: in steady state a connection carries the same number of
// bytes B in every iteration, and (the iteration being over before the next one
// starts) the first transfer of each iteration starts at offset o + k * B. The
// order of transfers inside an iteration may change (Gloo runs two collectives at
// once), so only the iteration's first write recurs. Anchors are the messages
// after the longest idle gaps (where an iteration starts after compute); the
// period is the shortest start distance after an anchor at which most multiples
// land on a call start, at messages that mostly waited at least twice as long as
// the others (the compute between iterations).
std::vector<std::int64_t> cut_direction(const CaptureAnalysis& a, const std::vector<std::size_t>& msgs,
                                        const std::vector<std::uint64_t>& calls) {
  const std::size_t n = msgs.size();
  if (n < 6 || calls.empty()) return {};
  std::vector<std::uint64_t> start(n);
  std::vector<Nanos> gap(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    start[i] = a.messages[msgs[i]].begin;
    // The connection's own idle time before the message. (The whole rank's idle
    // time, since any of its connections was active, tells iterations apart less
    // well: with ranks sharing cores, a rank's other connections are busy at some
    // iteration starts and not at others.)
    if (i > 0) gap[i] = std::max<Nanos>(0, a.messages[msgs[i]].ready - a.messages[msgs[i - 1]].sent_app);
  }
  const auto has_call = [&](std::uint64_t o) { return std::binary_search(calls.begin(), calls.end(), o); };
  const std::size_t quarter = n / 4;
  const std::uint64_t from = start[quarter], last = start[n - 1];
  std::vector<std::size_t> anchors;
  for (std::size_t i = n / 2; i < n; ++i) anchors.push_back(i);
  const std::size_t na = std::min(kAnchors, anchors.size());
  std::partial_sort(anchors.begin(), anchors.begin() + static_cast<std::ptrdiff_t>(na), anchors.end(),
                    [&](std::size_t x, std::size_t y) { return gap[x] > gap[y]; });
  anchors.resize(na);
  std::uint64_t best_p = 0, best_base = 0, lone_p = 0, lone_base = 0;
  for (std::size_t an : anchors) {
    const std::uint64_t base = start[an];
    for (std::size_t j = an + 1; j < n && j <= an + kMaxPeriodCandidates; ++j) {
      const std::uint64_t p = start[j] - base;
      if (p == 0) continue;
      // Multiples of p from the first quarter to the end, at most kSampledPeriods of them.
      const std::int64_t k_lo = -static_cast<std::int64_t>((base - from) / p);
      const std::int64_t k_hi = static_cast<std::int64_t>((last - base) / p);
      if (k_hi - k_lo < 3) break;  // fewer than four iterations: no period to speak of
      // Multiples picked scattered over the range: an even stride could land on
      // multiples of the true period only and make a part of it look whole.
      const std::uint64_t range = static_cast<std::uint64_t>(k_hi - k_lo) + 1;
      std::vector<std::int64_t> ks;
      for (std::uint64_t t = 0; t < std::min<std::uint64_t>(range, kSampledPeriods); ++t) {
        ks.push_back(k_lo + static_cast<std::int64_t>(range <= kSampledPeriods ? t : (t * 2654435761ULL + 12345) % range));
      }
      std::size_t tried = 0, hit = 0;
      for (std::int64_t k : ks) {
        ++tried;
        hit += has_call(static_cast<std::uint64_t>(static_cast<std::int64_t>(base) + k * static_cast<std::int64_t>(p)));
      }
      if (static_cast<double>(hit) < kRecurShare * static_cast<double>(tried)) continue;
      // The cuts must fall where the connection is idle, clearly more than
      // between the other messages: on a stream of equal transfers every multiple
      // of one transfer recurs.
      std::vector<Nanos> at_cuts, between;
      for (std::int64_t k : ks) {
        const std::uint64_t o = static_cast<std::uint64_t>(static_cast<std::int64_t>(base) + k * static_cast<std::int64_t>(p));
        const auto m = std::lower_bound(start.begin(), start.end(), o);
        if (m != start.end() && *m == o) at_cuts.push_back(gap[static_cast<std::size_t>(m - start.begin())]);
      }
      for (std::size_t t = 0; t < std::min(n - quarter, kGapSamples); ++t) {
        const std::size_t i = quarter + (n - quarter <= kGapSamples ? t : (t * 2654435761ULL + 777) % (n - quarter));
        const std::uint64_t d = start[i] >= base ? start[i] - base : base - start[i];
        if (d % p != 0) between.push_back(gap[i]);
      }
      if (at_cuts.empty()) continue;
      // Most cuts, not half of them: a half period cuts every other time at the idle gap.
      std::sort(at_cuts.begin(), at_cuts.end());
      const double cut = static_cast<double>(at_cuts[at_cuts.size() / 4]);
      // One message per period: nothing to contrast with. It stands only if no
      // longer period shows idle cuts: a stream of equal transfers has one
      // message per any multiple of one transfer.
      if (between.empty()) {
        if (lone_p == 0 || p < lone_p) lone_p = p, lone_base = base;
        continue;
      }
      if (cut < kIdleRatio * static_cast<double>(std::max<Nanos>(1, upper_median(between)))) continue;
      // The shortest period that passes: every multiple of it passes too.
      if (best_p == 0 || p < best_p) best_p = p, best_base = base;
      break;
    }
  }
  if (best_p == 0) best_p = lone_p, best_base = lone_base;
  if (best_p == 0) return {};
  best_base = idlest_base(start, gap, has_call, best_p, best_base, from, last);
  // The steady part begins at the earliest cut from which the cuts recur back
  // from the anchor (one missing cut is forgiven).
  std::int64_t first_k = 0;
  for (std::int64_t k = 0, missing = 0;; --k) {
    const std::int64_t o = static_cast<std::int64_t>(best_base) + k * static_cast<std::int64_t>(best_p);
    if (o < static_cast<std::int64_t>(start[0])) break;
    if (has_call(static_cast<std::uint64_t>(o))) {
      first_k = k, missing = 0;
    } else if (++missing > 1) {
      break;
    }
  }
  const std::uint64_t steady = static_cast<std::uint64_t>(static_cast<std::int64_t>(best_base) + first_k * static_cast<std::int64_t>(best_p));
  std::vector<std::int64_t> piece(n, kNoIteration);
  for (std::size_t i = 0; i < n; ++i) {
    if (start[i] >= steady) piece[i] = static_cast<std::int64_t>((start[i] - steady) / best_p);
  }
  return piece;
}

Iterations from_annotations(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a, const Ranks& ranks) {
  Iterations it;
  it.source = "annotations";
  it.of_message.assign(a.messages.size(), kNoIteration);
  // Per rank process: iteration spans by begin; a message belongs to the last
  // one that began at or before its ready (up to the next one's begin).
  std::vector<std::vector<std::pair<Nanos, std::int64_t>>> begins(traces.size());
  for (const AnnotatedSpan& s : a.spans) {
    if (s.type == trace::MarkType::iteration && ranks.of_process[s.process]) begins[s.process].emplace_back(s.begin, s.value);
  }
  std::map<std::int64_t, std::size_t> seen;  // iteration -> ranks that have it
  for (auto& b : begins) {
    std::sort(b.begin(), b.end());
    std::set<std::int64_t> mine;
    for (const auto& x : b) mine.insert(x.second);
    for (std::int64_t v : mine) ++seen[v];
  }
  for (std::size_t i = 0; i < a.messages.size(); ++i) {
    const Message& m = a.messages[i];
    const auto& b = begins[a.connections[m.connection].process];
    auto p = std::upper_bound(b.begin(), b.end(), std::make_pair(m.ready, std::numeric_limits<std::int64_t>::max()));
    if (p != b.begin()) it.of_message[i] = (p - 1)->second;
  }
  for (const auto& [v, k] : seen) {
    if (k == ranks.ranks.size()) it.numbers.push_back(v);
  }
  return it;
}

}  // namespace

// (build_job.hpp) A connection's cut can land one message late: the sender's first transfer of
// an iteration follows its compute, and when the sender then waits for slower
// ranks, the idle gap after that transfer can be the longer one. The transfer is
// then the last of the iteration before, and the receiver, which in the job went
// on to its next iteration before it arrived, would wait for it in the replay
// (the barrier): an MPI replay ran 16% slow so. So while, in most iterations, a
// connection's last message of an iteration was read after its receiver had
// started the next one (its first send of it), that message moves to the next
// iteration.
void move_late_ends(const CaptureAnalysis& a, const std::vector<Direction>& dirs, const std::vector<std::size_t>& cut,
                    const std::vector<std::optional<std::int64_t>>& shift, std::vector<std::vector<std::int64_t>>& piece) {
  constexpr int kMaxMoves = 3;
  const auto numbered = [&](std::size_t d, std::size_t i) { return piece[d][i] == kNoIteration ? kNoIteration : piece[d][i] - *shift[d]; };
  // Per rank: iteration -> its first send in it, over its cut directions; made
  // again only for a rank one of whose directions moved.
  std::map<RankId, std::map<std::int64_t, Nanos>> first_send;
  const auto starts_of = [&](RankId r) -> const std::map<std::int64_t, Nanos>& {
    const auto [x, fresh] = first_send.try_emplace(r);
    if (!fresh) return x->second;
    for (std::size_t e : cut) {
      if (!shift[e] || dirs[e].src != r) continue;
      for (std::size_t i = 0; i < dirs[e].messages.size(); ++i) {
        const std::int64_t j = numbered(e, i);
        if (j == kNoIteration) continue;
        const Nanos t = a.messages[dirs[e].messages[i]].ready;
        const auto [y, first] = x->second.try_emplace(j, t);
        if (!first) y->second = std::min(y->second, t);
      }
    }
    return x->second;
  };
  for (std::size_t d : cut) {
    if (!shift[d]) continue;
    for (int move = 0; move < kMaxMoves; ++move) {
      const auto& next_start = starts_of(dirs[d].dst);
      std::map<std::int64_t, std::size_t> last;  // iteration -> index of d's last message in it
      for (std::size_t i = 0; i < dirs[d].messages.size(); ++i) {
        if (const std::int64_t j = numbered(d, i); j != kNoIteration) last[j] = i;
      }
      std::size_t late = 0, seen = 0;
      for (const auto& [j, i] : last) {
        const auto n = next_start.find(j + 1);
        const Message& m = a.messages[dirs[d].messages[i]];
        if (n == next_start.end() || m.recv_last < 0) continue;
        ++seen;
        late += m.recv_last > n->second;
      }
      if (seen < 3 || 2 * late <= seen) break;
      // Only where the receiver has a next iteration: the last one's end stays.
      for (const auto& [j, i] : last) {
        if (next_start.count(j + 1)) piece[d][i] += 1;
      }
      first_send.erase(dirs[d].src);
    }
  }
}

// (build_job.hpp) Iterations whose messages on one connection went out interleaved: an
// MPI rank sends a large message's data only once the receiver asked for it,
// and when that request came late the data followed the next iteration's first
// small message (3 ranks on 2 cores: 4 stretches of 1 to 5 iterations in one
// capture of 30). Cut where it was, the first iteration of such a stretch lacks
// its data and holds the next one's small message, the last holds two data
// messages, and those between look usual but each holds its predecessor's data;
// the profile kept the 5 iterations in a row that were clean, and called the 18
// before them warm-up. Where an iteration's sizes differ from the connection's
// usual ones by as many surplus as missing messages, the surplus among its last
// messages and the missing among the next iteration's first, they change
// places, boundary after boundary (at most 8) until an iteration comes out
// usual; when none does, nothing moves.
void unswap_boundaries(const CaptureAnalysis& a, const std::vector<Direction>& dirs, const std::vector<std::size_t>& cut,
                       std::vector<std::vector<std::int64_t>>& piece) {
  constexpr std::size_t kMaxSwapped = 4;  // messages out of place at one boundary
  constexpr std::size_t kMaxChain = 8;    // boundaries one message may cross
  for (std::size_t d : cut) {
    const std::vector<std::size_t>& msgs = dirs[d].messages;
    if (piece[d].size() != msgs.size()) continue;
    const auto bytes = [&](std::size_t i) { return a.messages[msgs[i]].end - a.messages[msgs[i]].begin; };
    // piece -> its messages (indices into msgs), in stream order
    std::map<std::int64_t, std::vector<std::size_t>> of;
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      if (piece[d][i] != kNoIteration) of[piece[d][i]].push_back(i);
    }
    const auto sizes = [&](const std::vector<std::size_t>& v) {
      std::vector<Bytes> s;
      s.reserve(v.size());
      for (std::size_t i : v) s.push_back(bytes(i));
      std::sort(s.begin(), s.end());
      return s;
    };
    std::map<std::vector<Bytes>, std::size_t> count;
    for (const auto& [j, v] : of) ++count[sizes(v)];
    if (count.size() < 2) continue;
    const std::vector<Bytes> usual =
        std::max_element(count.begin(), count.end(), [](const auto& x, const auto& y) { return x.second < y.second; })->first;
    // One boundary: the surplus sizes of `mine` (the latest of each among its
    // last messages) for the missing ones of `theirs` (the earliest among its
    // first); false when they are not there.
    const auto swap_at = [&](std::vector<std::size_t>& mine, std::vector<std::size_t>& theirs) {
      const std::vector<Bytes> have = sizes(mine);
      if (have.size() != usual.size()) return false;
      std::vector<Bytes> surplus, missing;
      std::set_difference(have.begin(), have.end(), usual.begin(), usual.end(), std::back_inserter(surplus));
      std::set_difference(usual.begin(), usual.end(), have.begin(), have.end(), std::back_inserter(missing));
      if (surplus.empty() || surplus.size() != missing.size() || surplus.size() > kMaxSwapped) return false;
      const std::size_t window = 2 * surplus.size() + 2;
      std::vector<bool> out(mine.size(), false), in(theirs.size(), false);
      for (Bytes b : surplus) {
        bool got = false;
        for (std::size_t k = mine.size(); !got && k-- > (mine.size() > window ? mine.size() - window : 0);) {
          if (!out[k] && bytes(mine[k]) == b) out[k] = got = true;
        }
        if (!got) return false;
      }
      for (Bytes b : missing) {
        bool got = false;
        for (std::size_t k = 0; !got && k < std::min(window, theirs.size()); ++k) {
          if (!in[k] && bytes(theirs[k]) == b) in[k] = got = true;
        }
        if (!got) return false;
      }
      std::vector<std::size_t> new_mine, new_theirs;
      for (std::size_t k = 0; k < mine.size(); ++k) (out[k] ? new_theirs : new_mine).push_back(mine[k]);
      for (std::size_t k = 0; k < theirs.size(); ++k) (in[k] ? new_mine : new_theirs).push_back(theirs[k]);
      std::sort(new_mine.begin(), new_mine.end());
      std::sort(new_theirs.begin(), new_theirs.end());
      mine = std::move(new_mine);
      theirs = std::move(new_theirs);
      return sizes(mine) == usual;
    };
    for (auto x = of.begin(); x != of.end(); ++x) {
      if (sizes(x->second) == usual) continue;
      // A message can be out of place by more than one iteration: swap at up to
      // kMaxChain boundaries in a row, kept only if the last piece comes out
      // usual too (an iteration with a message of another size would pass it on
      // to the end: nothing moves).
      std::vector<std::pair<std::int64_t, std::vector<std::size_t>>> saved;
      bool mended = false;
      for (auto at = x; !mended && saved.size() <= kMaxChain; ++at) {
        const auto next = std::next(at);
        if (next == of.end() || next->first != at->first + 1) break;
        if (saved.empty()) saved.emplace_back(at->first, at->second);
        saved.emplace_back(next->first, next->second);
        if (!swap_at(at->second, next->second)) break;
        mended = sizes(next->second) == usual;
      }
      if (!mended) {
        for (auto& [j, v] : saved) of[j] = std::move(v);
        continue;
      }
      for (const auto& [j, v] : saved) {
        for (std::size_t i : of[j]) piece[d][i] = j;
      }
    }
  }
}

Iterations find_iterations(const std::vector<ProcessTrace>& traces, const CaptureAnalysis& a, const Ranks& ranks,
                           const std::vector<Direction>& dirs, std::vector<std::string>& warnings) {
  const std::size_t nr = ranks.ranks.size();
  bool annotated = nr > 0;
  for (const RankInfo& r : ranks.ranks) {
    std::size_t n = 0;
    for (const AnnotatedSpan& s : a.spans) n += s.process == r.process && s.type == trace::MarkType::iteration;
    annotated = annotated && n >= 2;
  }
  if (annotated) return from_annotations(traces, a, ranks);

  Iterations it;
  it.source = "periodic traffic";
  it.of_message.assign(a.messages.size(), kNoIteration);
  // Each data direction cut on its own.
  std::vector<std::size_t> cut;  // indices into dirs of the directions with a period
  std::vector<std::vector<std::int64_t>> piece(dirs.size());
  for (std::size_t d = 0; d < dirs.size(); ++d) {
    if (dirs[d].use != "data") continue;
    piece[d] = cut_direction(a, dirs[d].messages, a.call_offsets[dirs[d].conn]);
    if (!piece[d].empty()) cut.push_back(d);
  }
  if (cut.empty()) {
    throw std::runtime_error("no connection's traffic repeats: mark iterations with tensorwire.annotate "
                             "(docs/profile-build.md) or capture more iterations");
  }
  // A period is the job's iteration only if it lasts as long as the iteration
  // found on the busiest connection: a stream of equal notifications recurs at
  // every message. Connections whose period is much shorter or longer (half or
  // twice as long), or that it cuts into 1.5 times as many pieces or more, are
  // placed by time, below. (A DDP capture's notifications recurred every half
  // iteration, between its two all-reduce phases; their piece times varied too
  // much to tell, as an MPI job's do. Numbered as iterations, they moved the
  // others' cuts by a message in some iterations only, and 2 of 30 iterations
  // came out alike.) So are connections whose pieces carry under a hundredth of
  // the busiest one's bytes, whatever their period: on a slow machine, a DDP
  // capture's Gloo notifications (about 1 kB an iteration beside 2.4 MB) were
  // cut at a byte period that lasted an iteration but fell between messages that
  // were not idle, and their 21 pieces, numbered as iterations, left 2 of 20
  // iterations alike.
  // Each direction's piece time and count as cut (before any join), found once.
  std::vector<Nanos> piece_times(dirs.size(), -1);
  std::vector<std::size_t> piece_counts(dirs.size(), 0);
  const auto find_piece_time = [&](std::size_t d) {
    std::map<std::int64_t, Nanos> first;
    for (std::size_t i = 0; i < dirs[d].messages.size(); ++i) {
      if (piece[d][i] == kNoIteration) continue;
      const Nanos t = a.messages[dirs[d].messages[i]].ready;
      const auto [it, fresh] = first.try_emplace(piece[d][i], t);
      if (!fresh) it->second = std::min(it->second, t);
    }
    std::vector<Nanos> step;
    for (auto it = first.begin(); it != first.end() && std::next(it) != first.end(); ++it) {
      if (std::next(it)->first == it->first + 1) step.push_back(std::next(it)->second - it->second);
    }
    return step.empty() ? Nanos{0} : percentile(step, 0.5);
  };
  std::vector<std::uint64_t> piece_bytes(dirs.size(), 0);  // bytes a piece carries, on average
  for (std::size_t d : cut) {
    piece_times[d] = find_piece_time(d);
    std::set<std::int64_t> v(piece[d].begin(), piece[d].end());
    v.erase(kNoIteration);
    piece_counts[d] = v.size();
    std::uint64_t steady = 0;
    for (std::size_t i = 0; i < dirs[d].messages.size(); ++i) {
      if (piece[d][i] == kNoIteration) continue;
      const Message& m = a.messages[dirs[d].messages[i]];
      steady += m.end - m.begin;
    }
    piece_bytes[d] = v.empty() ? 0 : steady / v.size();
  }
  const auto piece_time = [&](std::size_t d) { return piece_times[d]; };
  const auto pieces = [&](std::size_t d) { return piece_counts[d]; };
  const auto bytes = [&](std::size_t x) { return a.connections[dirs[x].conn].bytes_sent; };
  // A whole period m times another's (m from 2 to kMaxParts, within a quarter),
  // with about 1/m as many pieces: the other is cut into parts of it.
  const auto parts_of = [&](std::size_t whole, std::size_t part) -> std::int64_t {
    const Nanos tw = piece_time(whole), tp = piece_time(part);
    if (tw <= 0 || tp <= 0) return 0;
    const std::int64_t m = (tw + tp / 2) / tp;
    const std::size_t n = pieces(whole) * static_cast<std::size_t>(std::max<std::int64_t>(m, 0)), np = pieces(part);
    const bool counts = np + 2 * static_cast<std::size_t>(m) >= n && np <= n + 2 * static_cast<std::size_t>(m);
    return m >= 2 && m <= static_cast<std::int64_t>(kMaxParts) && 4 * std::abs(m * tp - tw) <= tw && counts ? m : 0;
  };
  std::size_t busiest = *std::max_element(cut.begin(), cut.end(), [&](std::size_t x, std::size_t y) { return bytes(x) < bytes(y); });
  // DDP's ring directions carry about the same bytes, some cut into halves of
  // the iteration and some whole: the iteration is the whole one's.
  {
    std::size_t whole = busiest;
    for (std::size_t d : cut) {
      if (2 * bytes(d) >= bytes(busiest) && parts_of(d, busiest) > 0 && piece_time(d) > piece_time(whole)) whole = d;
    }
    busiest = whole;
  }
  const Nanos period = piece_time(busiest);
  const std::size_t iterations = pieces(busiest);
  std::vector<std::size_t> parts;  // directions cut at a whole fraction of the iteration
  std::erase_if(cut, [&](std::size_t d) {
    const Nanos t = piece_time(d);
    const bool keep = d == busiest || (2 * t >= period && t <= 2 * period && 2 * pieces(d) < 3 * iterations &&
                                       kSmallShare * piece_bytes[d] >= piece_bytes[busiest]);
    if (!keep && parts_of(busiest, d) > 0) {
      parts.push_back(d);
      return true;
    }
    if (!keep) piece[d].clear();
    return !keep;
  });
  // Only for a rank left with no direction of its own: the others' parts go by
  // time through their rank's whole direction, as before.
  std::erase_if(parts, [&](std::size_t d) {
    const bool alone = std::none_of(cut.begin(), cut.end(), [&](std::size_t e) { return dirs[e].src == dirs[d].src; });
    if (!alone) piece[d].clear();
    return !alone;
  });
  const auto by_ready = [&](std::size_t d) {
    std::vector<std::pair<Nanos, std::int64_t>> v;  // (ready, piece)
    for (std::size_t i = 0; i < dirs[d].messages.size(); ++i) {
      if (piece[d][i] != kNoIteration) v.emplace_back(a.messages[dirs[d].messages[i]].ready, piece[d][i]);
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<std::vector<std::pair<Nanos, std::int64_t>>> ready(dirs.size());
  for (std::size_t d : cut) ready[d] = by_ready(d);
  // Votes for piece(e) - piece(d), from d's messages: a receiver's next send on e
  // after the receipt, and a rank's next send on its other direction e.
  const auto vote = [&](std::size_t d, std::size_t e, std::map<std::int64_t, std::size_t>& v, std::int64_t sign) {
    const bool answers = dirs[e].src == dirs[d].dst, same_rank = dirs[e].src == dirs[d].src;
    if (!answers && !same_rank) return;
    const auto& re = ready[e];
    for (std::size_t i = 0; i < dirs[d].messages.size(); ++i) {
      if (piece[d][i] == kNoIteration) continue;
      const Message& m = a.messages[dirs[d].messages[i]];
      if (answers && m.recv_last >= 0) {
        const auto next = std::lower_bound(re.begin(), re.end(), std::make_pair(m.recv_last, std::numeric_limits<std::int64_t>::min()));
        if (next != re.end()) ++v[sign * (next->second - piece[d][i])];
      }
      if (same_rank) {
        const auto next = std::lower_bound(re.begin(), re.end(), std::make_pair(m.ready, std::numeric_limits<std::int64_t>::min()));
        if (next != re.end()) ++v[sign * (next->second - piece[d][i])];
      }
    }
  };
  // A direction cut into m pieces per iteration (DDP's connections carry an
  // iteration's buckets in equal halves when the model's two buckets are alike,
  // and the gap between them is as idle as the compute before the first) has its
  // pieces joined m at a time. Of the m ways to join them, the one whose
  // numbering the other directions agree on best: joined at a bucket, each piece
  // holds two iterations' halves, and the receivers' next sends split between two
  // numbers. (One rank's two directions cut so, in 2 of 21 DDP captures on 3
  // hosts, and were left out as irregular: a third of the job's bytes.)
  const std::vector<std::vector<std::int64_t>> kept_piece = piece;
  std::vector<std::size_t> joined;
  for (std::size_t d : parts) {
    const std::int64_t m = parts_of(busiest, d);
    double best_share = -1, second_share = -1;
    std::int64_t best_phase = 0;
    for (std::int64_t phase = 0; phase < m; ++phase) {
      for (std::size_t i = 0; i < piece[d].size(); ++i) {
        const std::int64_t q = kept_piece[d][i];
        piece[d][i] = q == kNoIteration || q < phase ? kNoIteration : (q - phase) / m;
      }
      ready[d] = by_ready(d);
      std::size_t agree = 0, all = 0;
      for (std::size_t e : cut) {
        std::map<std::int64_t, std::size_t> v;
        vote(d, e, v, 1);
        vote(e, d, v, -1);
        std::size_t top = 0;
        for (const auto& [x, k] : v) top = std::max(top, k), all += k;
        agree += top;
      }
      const double share = all == 0 ? 0.0 : static_cast<double>(agree) / static_cast<double>(all);
      if (share > best_share) {
        second_share = best_share, best_share = share, best_phase = phase;
      } else {
        second_share = std::max(second_share, share);
      }
    }
    // No way of joining them holds, or two hold alike: placed by time.
    if (best_share < kRecurShare || best_share - second_share < kJoinLead) {
      piece[d].clear();
      ready[d].clear();
      continue;
    }
    for (std::size_t i = 0; i < piece[d].size(); ++i) {
      const std::int64_t q = kept_piece[d][i];
      piece[d][i] = q == kNoIteration || q < best_phase ? kNoIteration : (q - best_phase) / m;
    }
    ready[d] = by_ready(d);
    joined.push_back(d);
  }
  cut.insert(cut.end(), joined.begin(), joined.end());
  std::sort(cut.begin(), cut.end());
  std::map<std::pair<std::size_t, std::size_t>, std::map<std::int64_t, std::size_t>> votes;
  for (std::size_t d : cut) {
    for (std::size_t e : cut) {
      if (d != e) vote(d, e, votes[{d, e}], 1);
    }
  }
  // Number from the heaviest direction of the first rank that has one.
  std::size_t root = cut.front();
  for (std::size_t d : cut) {
    const auto bytes = [&](std::size_t x) { return a.connections[dirs[x].conn].bytes_sent; };
    if (dirs[d].src < dirs[root].src || (dirs[d].src == dirs[root].src && bytes(d) > bytes(root))) root = d;
  }
  std::vector<std::optional<std::int64_t>> shift(dirs.size());
  shift[root] = 0;
  std::vector<std::size_t> queue{root};
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const std::size_t d = queue[q];
    // A joined direction takes its number from the others and passes none on:
    // its own votes are what chose its join.
    if (d != root && std::find(joined.begin(), joined.end(), d) != joined.end()) continue;
    for (std::size_t e : cut) {
      if (shift[e]) continue;
      std::map<std::int64_t, std::size_t> v;  // piece(e) - piece(d)
      if (const auto f = votes.find({d, e}); f != votes.end()) {
        for (const auto& [x, k] : f->second) v[x] += k;
      }
      if (const auto f = votes.find({e, d}); f != votes.end()) {
        for (const auto& [x, k] : f->second) v[-x] += k;
      }
      if (v.empty()) continue;
      const auto best = std::max_element(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
      shift[e] = *shift[d] + best->first;
      queue.push_back(e);
    }
  }
  move_late_ends(a, dirs, cut, shift, piece);
  unswap_boundaries(a, dirs, cut, piece);
  std::map<std::int64_t, std::set<RankId>> senders;  // iteration -> ranks that sent in it
  std::set<RankId> ranks_cut;
  for (std::size_t d : cut) {
    if (!shift[d]) {
      warnings.push_back("the connection " + a.connections[dirs[d].conn].local.address + " -> " +
                         a.connections[dirs[d].conn].remote.address + " exchanged nothing with the others: left out");
      continue;
    }
    ranks_cut.insert(dirs[d].src);
    for (std::size_t i = 0; i < dirs[d].messages.size(); ++i) {
      if (piece[d][i] == kNoIteration) continue;
      const std::int64_t j = piece[d][i] - *shift[d];
      it.of_message[dirs[d].messages[i]] = j;
      senders[j].insert(dirs[d].src);
    }
  }
  // Directions without a period of their own (a few messages each iteration) go
  // by time: an iteration of their rank begins halfway through the idle gap
  // between the rank's previous iteration's last send and its own first one.
  for (std::size_t d = 0; d < dirs.size(); ++d) {
    if (dirs[d].use != "data" || !piece[d].empty()) continue;
    std::map<std::int64_t, std::pair<Nanos, Nanos>> span;  // iteration -> (first ready, last return) on the rank
    for (std::size_t e : cut) {
      if (dirs[e].src != dirs[d].src || !shift[e]) continue;
      for (std::size_t i = 0; i < dirs[e].messages.size(); ++i) {
        if (piece[e][i] == kNoIteration) continue;
        const Message& m = a.messages[dirs[e].messages[i]];
        const auto [x, fresh] = span.try_emplace(piece[e][i] - *shift[e], m.ready, m.sent_app);
        if (!fresh) x->second.first = std::min(x->second.first, m.ready), x->second.second = std::max(x->second.second, m.sent_app);
      }
    }
    std::vector<std::pair<Nanos, std::int64_t>> begins;
    for (auto x = span.begin(); x != span.end(); ++x) {
      Nanos b = x->second.first;
      if (x != span.begin() && std::prev(x)->first == x->first - 1 && std::prev(x)->second.second < b) {
        b -= (b - std::prev(x)->second.second) / 2;
      }
      begins.emplace_back(b, x->first);
    }
    for (std::size_t m : dirs[d].messages) {
      const auto p = std::upper_bound(begins.begin(), begins.end(), std::make_pair(a.messages[m].ready, std::numeric_limits<std::int64_t>::max()));
      if (p != begins.begin()) it.of_message[m] = (p - 1)->second;
    }
  }
  for (const Direction& d : dirs) {
    if (d.use != "data") continue;
    for (std::size_t m : d.messages) it.before_first += it.of_message[m] == kNoIteration;
  }
  std::int64_t low = senders.empty() ? 0 : senders.begin()->first;
  for (auto& v : it.of_message) {
    if (v != kNoIteration) v -= low;
  }
  for (const auto& [j, who] : senders) {
    if (who.size() == ranks_cut.size()) it.numbers.push_back(j - low);
  }
  return it;
}

}  // namespace tw::build
