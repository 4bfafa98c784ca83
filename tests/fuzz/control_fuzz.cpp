// libFuzzer target for the control plane's messages, both ways, and the roster:
// any text decodes to a message or a reason, never a crash; a message that
// decodes encodes back to one that decodes to the same type.
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/protocol/roster.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto m = tw::decode_agent_message(text); m.message) {
    const auto again = tw::decode_agent_message(tw::encode(*m.message));
    if (!again.message || again.message->index() != m.message->index()) std::abort();
  }
  if (const auto m = tw::decode_controller_message(text); m.message) {
    const auto again = tw::decode_controller_message(tw::encode(*m.message));
    if (!again.message || again.message->index() != m.message->index()) std::abort();
  }
  try {
    (void)tw::parse_roster(std::string(text), "fuzz-roster.yaml");
  } catch (const std::exception&) {
  }
  return 0;
}
