// Who may hold a connection before presenting the run's token. A listener takes
// every connection the kernel hands it (so that the backlog never fills with
// strangers while an agent waits behind them), then admits it only while fewer
// than `total` unauthenticated connections are open, and fewer than `per_source`
// from its address; the others are closed at once. An admitted connection holds a
// Ticket until its token has been checked (or it closes): the memory and the
// descriptors strangers can take are bounded by the caps times the request limit.
// Pure (no I/O); one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace tw::net {

class Admission {
  struct State {
    std::size_t total = 0;
    std::size_t per_source = 0;
    std::size_t pending = 0;
    std::unordered_map<std::string, std::size_t> by_source;
    std::uint64_t refused = 0;
  };

 public:
  // A slot held by one admitted connection; freed by release() or its destructor.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept = default;
    Ticket& operator=(Ticket&& o) noexcept {
      if (this != &o) {
        release();
        state_ = std::move(o.state_);
        source_ = std::move(o.source_);
      }
      return *this;
    }
    ~Ticket() { release(); }
    void release();
    bool held() const { return state_ != nullptr; }

   private:
    friend class Admission;
    Ticket(std::shared_ptr<State> s, std::string source) : state_(std::move(s)), source_(std::move(source)) {}
    std::shared_ptr<State> state_;
    std::string source_;
  };

  Admission(std::size_t total, std::size_t per_source);

  // A ticket for a connection from `source` (an address, without the port), or
  // nullopt and `why` ("N unauthenticated connections from ADDRESS already", ...).
  std::optional<Ticket> admit(const std::string& source, std::string* why);

  std::size_t pending() const { return state_->pending; }
  std::uint64_t refused() const { return state_->refused; }
  std::size_t total_cap() const { return state_->total; }
  std::size_t per_source_cap() const { return state_->per_source; }

 private:
  std::shared_ptr<State> state_;
};

// Whether the n-th refusal (1-based) gets a line in the log: the 1st, 10th,
// 100th, ... so that a flood leaves a few lines, not one per connection.
bool log_refusal(std::uint64_t n);

// The cap on unauthenticated connections that leaves room, under a descriptor
// limit of `fd_limit`, for `needed` descriptors the run itself uses (sessions,
// result files, flows): a quarter of what remains, within [4, 128].
std::size_t pending_cap(std::uint64_t fd_limit, std::uint64_t needed);

// Raises this process's soft limit on open descriptors to its hard limit (at most
// `most`); returns the soft limit in force afterwards.
std::uint64_t raise_fd_limit(std::uint64_t most = 65536);

}  // namespace tw::net
