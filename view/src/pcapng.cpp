// pcapng (the IETF draft "PCAP Next Generation Dump File Format"): a section
// header, an interface description per pcap file of the capture (its link type,
// nanosecond timestamps), and an enhanced packet block per frame with an
// opt_comment for the data segments whose message is known.
#include "tensorwire/view/pcapng.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>
#include <stdexcept>

#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/core/wire.hpp"
#include "tensorwire/profile/build.hpp"

namespace tw::view {
namespace {

namespace fs = std::filesystem;

class Blocks {
 public:
  explicit Blocks(std::ostream& out) : out_(out) {}
  // A block: type, total length, body (padded to 4), total length again.
  void block(std::uint32_t type, const std::string& body) {
    const std::uint32_t len = static_cast<std::uint32_t>(12 + body.size());
    put(type), put(len);
    out_.write(body.data(), static_cast<std::streamsize>(body.size()));
    put(len);
  }
  template <typename T>
  static void add(std::string& b, T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  // An option: code, length, value padded to 4.
  static void option(std::string& b, std::uint16_t code, const std::string& value) {
    add(b, code), add(b, static_cast<std::uint16_t>(value.size()));
    b += value;
    b.append((4 - value.size() % 4) % 4, '\0');
  }
  static void end_of_options(std::string& b) { add(b, std::uint32_t{0}); }

 private:
  void put(std::uint32_t v) { out_.write(reinterpret_cast<const char*>(&v), 4); }
  std::ostream& out_;
};

constexpr std::uint32_t kSectionHeader = 0x0A0D0D0A, kInterface = 1, kEnhancedPacket = 6;
constexpr std::uint16_t kOptComment = 1, kIfName = 2, kIfTsResol = 9;

// A connection's sending side as the wire sees it.
struct Sender {
  std::size_t connection;
  wire::WireIndex::Start start;
  std::uint64_t last = 0;  // the offset of its previous segment (to unwrap sequence numbers)
};

}  // namespace

PcapngCounts write_pcapng(const std::vector<std::string>& dirs, std::ostream& out) {
  const CaptureJob job = read_capture_job(dirs);
  if (!job.wire) throw std::runtime_error(dirs.at(0) + ": no wire tap in this capture (tensorwire capture --wire)");
  std::map<std::string, Nanos> shift;
  for (const auto& c : job.clocks) {
    if (c.offset != 0) shift[c.host] = c.offset;
  }
  const WireCapture wire = read_wire_captures(dirs, shift);
  const CaptureAnalysis& an = job.analysis;
  // Each connection's key and session on the wire, and its messages by offset.
  std::map<wire::FlowKey, std::vector<Sender>> senders;
  std::vector<std::vector<std::size_t>> messages(an.connections.size());
  for (std::size_t m = 0; m < an.messages.size(); ++m) messages[an.messages[m].connection].push_back(m);
  // Each process's first connection event of each connection: one pass over its
  // events, not one per connection (a trace with 300 000 of them took 45 s).
  std::vector<std::unordered_map<std::uint32_t, const trace::ConnEvent*>> first_event(job.traces.size());
  for (std::size_t p = 0; p < job.traces.size(); ++p) {
    for (const trace::ConnEvent& e : job.traces[p].conns) first_event[p].try_emplace(e.conn, &e);
  }
  for (std::size_t ci = 0; ci < an.connections.size(); ++ci) {
    const Connection& c = an.connections[ci];
    const auto found = first_event[c.process].find(c.id);
    if (found == first_event[c.process].end()) continue;
    const trace::ConnEvent& e = *found->second;
    const wire::FlowKey key = wire::flow_key(e.family, e.local, e.local_port, e.remote, e.remote_port);
    if (const auto start = wire.index.stream_start(key, e.at_ns)) senders[key].push_back({ci, *start});
  }
  const auto name_of = [&](std::size_t process) {
    const auto r = job.rank_of_process[process];
    return r ? "rank " + std::to_string(*r) : "pid " + std::to_string(job.traces[process].pid);
  };
  // The comment of a data segment seen at `t` (on the job's clock): its message,
  // or "" when no traced connection's stream holds it.
  const auto comment_for = [&](const wire::Segment& seg, Nanos t) -> std::string {
    const auto it = senders.find(seg.key);
    if (it == senders.end()) return "";
    Sender* s = nullptr;
    for (Sender& x : it->second) {
      if (t >= x.start.opened && t < x.start.until) s = &x;
    }
    if (!s) return "";
    // The segment's offset in the stream, unwrapped around the previous one.
    const std::uint32_t rel = seg.seq - s->start.seq0;
    const auto delta = static_cast<std::int32_t>(rel - static_cast<std::uint32_t>(s->last));
    const auto off = static_cast<std::uint64_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(s->last) + delta));
    s->last = off;
    const auto& ms = messages[s->connection];
    const auto m = std::upper_bound(ms.begin(), ms.end(), off, [&](std::uint64_t o, std::size_t k) { return o < an.messages[k].begin; });
    if (m == ms.begin()) return "";
    const std::size_t k = *std::prev(m);
    const Message& x = an.messages[k];
    if (off >= x.end) return "";
    const Connection& c = an.connections[s->connection];
    const std::string to = c.peer ? name_of(an.connections[*c.peer].process) : c.remote.address;
    std::string text = "tensorwire: " + name_of(c.process) + " to " + to + ", message " + std::to_string(std::prev(m) - ms.begin()) +
                       " of this connection (" + human_bytes(x.end - x.begin) + "), its bytes " + std::to_string(off - x.begin) + " to " +
                       std::to_string(std::min<std::uint64_t>(off + seg.payload, x.end) - x.begin);
    if (job.iteration_of_message[k] >= 0) text += ", iteration " + std::to_string(job.iteration_of_message[k]);
    if (x.bucket_span >= 0) text += ", DDP bucket " + std::to_string(an.spans[static_cast<std::size_t>(x.bucket_span)].aux);
    if (x.control) text += ", a control message";
    // TCP puts small messages sent close together into one segment.
    if (off + seg.payload > x.end) text += "; then " + std::to_string(off + seg.payload - x.end) + " bytes of the messages after it";
    return text;
  };
  Blocks w(out);
  {
    std::string b;
    Blocks::add(b, std::uint32_t{0x1A2B3C4D});  // byte-order magic
    Blocks::add(b, std::uint16_t{1}), Blocks::add(b, std::uint16_t{0});
    Blocks::add(b, std::int64_t{-1});  // section length: not given
    Blocks::option(b, 4, "tensorwire trace pcapng");  // shb_userappl
    Blocks::end_of_options(b);
    w.block(kSectionHeader, b);
  }
  PcapngCounts n;
  std::uint32_t interface = 0;
  for (const std::string& dir : dirs) {
    const TimeSpan span = capture_span(dir);
    for (const std::string& session : capture_dir::session_files(dir)) {
      const nlohmann::json j = read_json_file(session);
      if (!j.is_object() || !j.contains("wire") || !j["wire"].is_object() || !j["wire"].contains("files") || !j["wire"]["files"].is_array()) continue;
      const std::string host = json_string(j, "host", session);
      const Nanos host_shift = shift.count(host) ? shift.at(host) : 0;
      std::vector<std::string> names;
      for (const auto& f : j["wire"]["files"]) {
        if (f.is_string()) names.push_back(f.get<std::string>());
      }
      for (const std::string& path : capture_dir::listed_wire_files(dir, names, session)) {
        const std::string name = std::filesystem::path(path).filename().string();
        bool described = false;
        wire::for_each_frame(path, [&](const wire::RawFrame& fr) {
          if (!described) {
            std::string b;
            Blocks::add(b, static_cast<std::uint16_t>(fr.linktype)), Blocks::add(b, std::uint16_t{0});
            Blocks::add(b, std::uint32_t{0});  // snaplen: none
            Blocks::option(b, kIfName, name);
            Blocks::option(b, kIfTsResol, std::string(1, '\x09'));  // 10^-9 s
            Blocks::end_of_options(b);
            w.block(kInterface, b);
            described = true;
          }
          std::string comment;
          if (const auto seg = wire::parse_frame(fr.linktype, fr.data, fr.caplen, fr.origlen); seg && seg->payload > 0) {
            comment = comment_for(*seg, fr.ts - host_shift);
          }
          std::string b;
          const auto ts = static_cast<std::uint64_t>(fr.ts);
          Blocks::add(b, interface);
          Blocks::add(b, static_cast<std::uint32_t>(ts >> 32)), Blocks::add(b, static_cast<std::uint32_t>(ts));
          Blocks::add(b, fr.caplen), Blocks::add(b, fr.origlen);
          b.append(reinterpret_cast<const char*>(fr.data), fr.caplen);
          b.append((4 - fr.caplen % 4) % 4, '\0');
          if (!comment.empty()) {
            Blocks::option(b, kOptComment, comment);
            Blocks::end_of_options(b);
            ++n.annotated;
          }
          w.block(kEnhancedPacket, b);
          ++n.frames;
        }, span);
        if (described) ++interface;
        ++n.files;
      }
    }
  }
  return n;
}

}  // namespace tw::view
