// The run's shared secret: how it is made and how it is compared. Used by the
// controller (HTTP and WebSocket parties), the agent (data-flow handshakes) and the
// CLI (run ids). Any thread may call these.
#pragma once

#include <string>

namespace tw {

// Compares tokens in constant time in their content, so that a token cannot be
// guessed byte by byte from response times.
bool same_token(const std::string& a, const std::string& b);

// A random token of 32 hex digits (128 bits from getrandom); throws
// std::system_error if the kernel gives no randomness.
std::string random_token();

}  // namespace tw
