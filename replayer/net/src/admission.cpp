#include "tensorwire/net/admission.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace tw::net {

bool Admission::State::free(std::uint64_t id) {
  const auto e = live.find(id);
  if (e == live.end()) return false;
  const auto it = by_source.find(e->second.source);
  if (it != by_source.end() && --it->second == 0) by_source.erase(it);
  live.erase(e);
  return true;
}

void Admission::Ticket::release() {
  if (!state_) return;
  state_->free(id_);
  state_.reset();
}

Admission::Admission(std::size_t total, std::size_t per_source) : state_(std::make_shared<State>()) {
  state_->total = std::max<std::size_t>(total, 1);
  state_->per_source = std::clamp<std::size_t>(per_source, 1, state_->total);
}

std::optional<Admission::Ticket> Admission::admit(const std::string& source, std::string* why, std::function<void()> evict) {
  State& s = *state_;
  if (why) why->clear();
  // The connection in the way, if a cap is reached: the oldest from `source` at the
  // cap per address, else the oldest from the address holding the most.
  std::string cap;
  std::string victim_source;
  if (const auto it = s.by_source.find(source); it != s.by_source.end() && it->second >= s.per_source) {
    cap = std::to_string(it->second) + " unauthenticated connections from " + source + " open already (the cap per address)";
    victim_source = source;
  } else if (s.live.size() >= s.total) {
    cap = std::to_string(s.live.size()) + " unauthenticated connections open already (the cap)";
  }
  if (!cap.empty()) {
    // At the cap in total: of the addresses that hold the most connections that
    // can be closed, the oldest such connection (ties go by age, not by the
    // order of a hash map: one newly admitted must not be the next to go).
    std::size_t most = 0;
    if (victim_source.empty()) {
      for (const auto& [id, e] : s.live) {
        if (e.evict) most = std::max(most, s.by_source.at(e.source));
      }
    }
    auto victim = s.live.end();
    for (auto e = s.live.begin(); e != s.live.end(); ++e) {
      if (!e->second.evict) continue;
      if (victim_source.empty() ? s.by_source.at(e->second.source) == most : e->second.source == victim_source) {
        victim = e;
        break;
      }
    }
    if (victim != s.live.end()) victim_source = victim->second.source;
    if (victim == s.live.end()) {
      ++s.refused;
      if (why) *why = cap;
      return std::nullopt;
    }
    // Freed before it is closed: closing may release its ticket, which then finds
    // nothing to free.
    const std::function<void()> close = std::move(victim->second.evict);
    s.free(victim->first);
    ++s.evicted;
    if (why) *why = "closed the oldest unauthenticated connection from " + victim_source + ": " + cap;
    close();
  }
  ++s.by_source[source];
  const std::uint64_t id = s.next++;
  s.live.emplace(id, Entry{source, std::move(evict)});
  return Ticket(state_, id);
}

bool log_refusal(std::uint64_t n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

std::size_t pending_cap(std::uint64_t fd_limit, std::uint64_t needed) {
  const std::uint64_t spare = fd_limit > needed ? fd_limit - needed : 0;
  return static_cast<std::size_t>(std::clamp<std::uint64_t>(spare / 4, 4, 128));
}

std::uint64_t raise_fd_limit(std::uint64_t most) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  const rlim_t want = std::min<rlim_t>(r.rlim_max, static_cast<rlim_t>(most));
  if (r.rlim_cur < want) {
    rlimit raised = r;
    raised.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur == RLIM_INFINITY ? most : static_cast<std::uint64_t>(r.rlim_cur);
}

}  // namespace tw::net
