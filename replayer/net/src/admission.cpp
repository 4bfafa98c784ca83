#include "tensorwire/net/admission.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace tw::net {

void Admission::Ticket::release() {
  if (!state_) return;
  auto it = state_->by_source.find(source_);
  if (it != state_->by_source.end() && --it->second == 0) state_->by_source.erase(it);
  --state_->pending;
  state_.reset();
}

Admission::Admission(std::size_t total, std::size_t per_source) : state_(std::make_shared<State>()) {
  state_->total = std::max<std::size_t>(total, 1);
  state_->per_source = std::clamp<std::size_t>(per_source, 1, state_->total);
}

std::optional<Admission::Ticket> Admission::admit(const std::string& source, std::string* why) {
  State& s = *state_;
  if (s.pending >= s.total) {
    ++s.refused;
    if (why) *why = std::to_string(s.pending) + " unauthenticated connections open already (the cap)";
    return std::nullopt;
  }
  auto& from = s.by_source[source];
  if (from >= s.per_source) {
    ++s.refused;
    if (why) *why = std::to_string(from) + " unauthenticated connections from " + source + " open already (the cap per address)";
    return std::nullopt;
  }
  ++from;
  ++s.pending;
  return Ticket(state_, source);
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
