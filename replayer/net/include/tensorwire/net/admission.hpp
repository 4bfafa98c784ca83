// Who may hold a connection before presenting the run's token. A listener takes
// every connection the kernel hands it (so that the backlog never fills with
// strangers while an agent waits behind them), then admits it under two caps: at
// most `total` unauthenticated connections open, and `per_source` from one
// address. At a cap the new connection is admitted and the oldest one in its way
// is closed (evicted): the oldest from the same address at the cap per address,
// the oldest from the address that holds the most at the cap in total. So a
// stranger who holds the slots open (a few dozen idle connections, each reopened
// as it is closed) cannot keep a real peer out: the peer's connection takes the
// slot of the oldest, and keeps it unless as many newer ones arrive while it
// presents its token. Refusing the newest instead locked the run out (a failed
// join or connect, at any timeout). A connection that cannot be evicted (no way
// to close it was given) is never evicted, and then the newcomer is refused. An
// admitted connection holds a Ticket until its token has been checked (or it
// closes): the memory and the descriptors strangers can take are bounded by the
// caps times the request limit.
// Pure (no I/O); one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace tw::net {

class Admission {
  struct Entry {
    std::string source;
    std::function<void()> evict;  // closes the connection; empty: it cannot be evicted
  };
  struct State {
    std::size_t total = 0;
    std::size_t per_source = 0;
    std::map<std::uint64_t, Entry> live;  // the admitted, oldest first
    std::uint64_t next = 0;
    std::unordered_map<std::string, std::size_t> by_source;
    std::uint64_t refused = 0;
    std::uint64_t evicted = 0;
    bool free(std::uint64_t id);
  };

 public:
  // A slot held by one admitted connection; freed by release() or its destructor.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : state_(std::move(o.state_)), id_(o.id_) {}
    Ticket& operator=(Ticket&& o) noexcept {
      if (this != &o) {
        release();
        state_ = std::move(o.state_);
        id_ = o.id_;
      }
      return *this;
    }
    ~Ticket() { release(); }
    void release();
    // False once released, moved from or evicted.
    bool held() const { return state_ != nullptr && state_->live.contains(id_); }

   private:
    friend class Admission;
    Ticket(std::shared_ptr<State> s, std::uint64_t id) : state_(std::move(s)), id_(id) {}
    std::shared_ptr<State> state_;
    std::uint64_t id_ = 0;
  };

  Admission(std::size_t total, std::size_t per_source);

  // A ticket for a connection from `source` (an address, without the port), which
  // `evict` closes should a newer one need its slot. At a cap an older connection
  // is evicted for it (its `evict` called, its ticket freed) and `why` says which
  // and why ("closed the oldest unauthenticated connection from ADDRESS: N open
  // from it already (the cap per address)"); `why` is left empty otherwise. Nullopt
  // (and `why`) only where no connection in the way can be evicted.
  std::optional<Ticket> admit(const std::string& source, std::string* why, std::function<void()> evict = {});

  std::size_t pending() const { return state_->live.size(); }
  std::uint64_t refused() const { return state_->refused; }
  std::uint64_t evicted() const { return state_->evicted; }
  std::size_t total_cap() const { return state_->total; }
  std::size_t per_source_cap() const { return state_->per_source; }

 private:
  std::shared_ptr<State> state_;
};

// Whether the n-th refusal or eviction (1-based) gets a line in the log: the 1st,
// 10th, 100th, ... so that a flood leaves a few lines, not one per connection.
bool log_refusal(std::uint64_t n);

// The cap on unauthenticated connections that leaves room, under a descriptor
// limit of `fd_limit`, for `needed` descriptors the run itself uses (sessions,
// result files, flows): a quarter of what remains, within [4, 128].
std::size_t pending_cap(std::uint64_t fd_limit, std::uint64_t needed);

// Raises this process's soft limit on open descriptors to its hard limit (at most
// `most`); returns the soft limit in force afterwards.
std::uint64_t raise_fd_limit(std::uint64_t most = 65536);

}  // namespace tw::net
