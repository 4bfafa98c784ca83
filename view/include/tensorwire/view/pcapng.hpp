// The wire tap of a capture as one pcapng file for Wireshark: every frame as it
// was captured, each data segment with a comment naming its message (its
// connection's ranks, its place in the message, its iteration and bucket).
// docs/view.md describes it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tw::view {

struct PcapngCounts {
  std::size_t files = 0;      // pcap files read (one interface each in the output)
  std::size_t frames = 0;     // written
  std::size_t annotated = 0;  // of them, data segments with their message named
};

// Reads the capture directories (one per host) and writes pcapng to `out`.
// Throws std::runtime_error naming the directory or file that is unreadable, or
// when the capture has no wire tap.
PcapngCounts write_pcapng(const std::vector<std::string>& dirs, std::ostream& out);

}  // namespace tw::view
