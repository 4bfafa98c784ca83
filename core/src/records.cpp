#include "tensorwire/core/records.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_set>

#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/frame.hpp"

namespace tw {

std::vector<Record> read_records(const std::string& path) {
  if (const std::string bad = data_file_problem(path, limits::kMaxDataFile); !bad.empty()) throw std::runtime_error(path + ": " + bad);
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  unsigned char header[binary_file::kHeaderSize];
  const std::size_t n = std::fread(header, 1, sizeof header, f.get());
  const std::string bad = binary_file::check_header(header, n, kRecordsMagic, "records file", kRecordsVersion, sizeof(Record));
  if (!bad.empty()) throw std::runtime_error(path + ": " + bad);
  return naming_file_on_oom(path, [&] {
    std::vector<Record> out;
    Record r;
    std::size_t got;
    while ((got = std::fread(&r, 1, sizeof r, f.get())) == sizeof r) {
      if (r.kind() < RecordKind::send || r.kind() > RecordKind::tcp_info) {
        throw std::runtime_error(path + ": record " + std::to_string(out.size()) + " is of unknown kind " +
                                 std::to_string(static_cast<int>(r.kind())));
      }
      out.push_back(r);
    }
    if (got != 0) throw std::runtime_error(path + ": truncated record at the end (" + std::to_string(out.size()) + " whole)");
    return out;
  });
}

namespace {

// A time is -1 (not measured) or within [0, 2^62) ns (146 years): any two then
// subtract and add without overflow. Durations (TCP_INFO) are never negative.
std::string bad_time(const Record& r) {
  constexpr std::int64_t kMost = std::int64_t{1} << 62;
  std::string bad;
  const auto time = [&](const char* name, std::int64_t t) {
    if (bad.empty() && t != -1 && (t < 0 || t >= kMost)) bad = std::string(name) + " " + std::to_string(t) + " is no time";
  };
  const auto duration = [&](const char* name, std::int64_t t) {
    if (bad.empty() && (t < 0 || t >= kMost)) bad = std::string(name) + " " + std::to_string(t) + " is no duration";
  };
  switch (r.kind()) {
    case RecordKind::send: {
      const auto x = r.as<SendRecord>();
      time("planned", x.planned), time("ready", x.ready), time("sent_app", x.sent_app);
      break;
    }
    case RecordKind::receive: {
      const auto x = r.as<ReceiveRecord>();
      time("recv_first", x.recv_first), time("recv_last", x.recv_last), time("delivered", x.delivered);
      break;
    }
    case RecordKind::compute: {
      const auto x = r.as<ComputeRecord>();
      time("planned", x.planned), time("start", x.start), time("end", x.end);
      break;
    }
    case RecordKind::iteration: {
      // An agent writes an iteration's record when it ends, both times taken:
      // an unmeasured one read as a time 1 ns before 1970 (compare's iteration
      // errors of 10^14 %).
      const auto x = r.as<IterationRecord>();
      time("start", x.start), time("end", x.end);
      if (bad.empty() && (x.start == -1 || x.end == -1)) bad = "an iteration without its start or end time";
      if (bad.empty() && x.end < x.start) bad = "an iteration that ends " + std::to_string(x.start - x.end) + " ns before it starts";
      break;
    }
    case RecordKind::tx_timestamps: {
      const auto x = r.as<TxTimestampsRecord>();
      time("sched_first", x.sched_first), time("wire_first", x.wire_first), time("wire_last", x.wire_last);
      time("acked", x.acked), time("sched_last", x.sched_last);
      break;
    }
    case RecordKind::tcp_info: {
      const auto x = r.as<TcpInfoRecord>();
      time("at", x.at), duration("sndbuf_limited_ns", x.sndbuf_limited_ns), duration("rtt_ns", x.rtt_ns);
      duration("rttvar_ns", x.rttvar_ns), duration("busy_ns", x.busy_ns), duration("rwnd_limited_ns", x.rwnd_limited_ns);
      break;
    }
  }
  return bad;
}

}  // namespace

std::string check_records(const std::vector<Record>& records, std::uint32_t rank, const Profile& profile) {
  const std::size_t ops = profile.ops.size(), flows = profile.flows.size();
  std::uint64_t finished = 0;
  for (const Record& r : records) finished += r.is(RecordKind::iteration) ? 1 : 0;
  std::unordered_set<std::uint64_t> seen[7];  // by kind: op instances (op, iteration), or iterations
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    const std::string at = "record " + std::to_string(i) + ": ";
    if (r.rank() != rank) return at + "names rank " + std::to_string(r.rank()) + " in the file of rank " + std::to_string(rank);
    std::optional<std::uint64_t> op, flow, iteration, bytes;
    if (const auto t = op_times(r)) {
      op = t->op;
      iteration = t->iteration;
      if (t->kind != RecordKind::compute) flow = t->flow, bytes = t->bytes;
    }
    switch (r.kind()) {
      case RecordKind::iteration: iteration = r.as<IterationRecord>().iteration; break;
      case RecordKind::tx_timestamps: {
        const auto x = r.as<TxTimestampsRecord>();
        op = x.op, iteration = x.iteration, flow = x.flow, bytes = x.bytes;
        break;
      }
      case RecordKind::tcp_info: flow = r.as<TcpInfoRecord>().flow; break;
      default: break;
    }
    if (const std::string bad = bad_time(r); !bad.empty()) return at + bad;
    if (op && *op >= ops) return at + "op " + std::to_string(*op) + ", but the profile has " + std::to_string(ops);
    if (flow && *flow >= flows) return at + "flow " + std::to_string(*flow) + ", but the profile has " + std::to_string(flows);
    const std::uint64_t most = r.is(RecordKind::iteration) ? finished : finished + 1;
    if (iteration && *iteration >= most) {
      return at + "iteration " + std::to_string(*iteration) + ", but the file holds " + std::to_string(finished) + " iteration(s)";
    }
    if (op) {
      const Op& o = profile.ops[*op];
      const bool message = flow.has_value();
      if (message && (o.type != OpType::send || o.flow != *flow)) {
        return at + "a message of op " + o.id + ", which is no send on flow " + profile.flows[*flow].id;
      }
      if (!message && o.type != OpType::compute) return at + "a compute record of op " + o.id + ", which is no compute op";
      if (bytes && *bytes > frame::wire_bytes(o.bytes)) {
        return at + std::to_string(*bytes) + " bytes of op " + o.id + ", which sends " + std::to_string(frame::wire_bytes(o.bytes));
      }
    }
    if (iteration && r.kind() != RecordKind::tcp_info) {
      const std::uint64_t key = (op.value_or(0) << 32) | *iteration;
      if (!seen[static_cast<int>(r.kind())].insert(key).second) {
        return at + "a second record of " + (op ? "op " + profile.ops[*op].id + " in " : std::string()) + "iteration " +
               std::to_string(*iteration);
      }
    }
  }
  return "";
}

std::optional<OpTimes> op_times(const Record& r) {
  switch (r.kind()) {
    case RecordKind::send: {
      const auto x = r.as<SendRecord>();
      return OpTimes{x.kind, x.op, x.iteration, x.flow, x.bytes, x.planned, x.ready, x.sent_app};
    }
    case RecordKind::receive: {
      const auto x = r.as<ReceiveRecord>();
      return OpTimes{x.kind, x.op, x.iteration, x.flow, x.bytes, -1, x.recv_first, x.delivered};
    }
    case RecordKind::compute: {
      const auto x = r.as<ComputeRecord>();
      return OpTimes{x.kind, x.op, x.iteration, 0, 0, x.planned, x.start, x.end};
    }
    default:
      return std::nullopt;
  }
}

RecordFile::RecordFile(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  if (f_ == nullptr) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  const auto header = binary_file::encode_header(kRecordsMagic, kRecordsVersion, sizeof(Record));
  if (std::fwrite(header.data(), 1, header.size(), f_) != header.size()) error_ = errno;
}

RecordFile::~RecordFile() { close(); }

void RecordFile::write(const Record* records, std::size_t n) {
  if (f_ == nullptr || error_ != 0 || n == 0) return;
  if (std::fwrite(records, sizeof(Record), n, f_) != n) {
    error_ = errno != 0 ? errno : EIO;
    return;
  }
  written_ += n;
}

int RecordFile::close() {
  if (f_ == nullptr) return error_;
  if (std::fflush(f_) != 0 && error_ == 0) error_ = errno;
  if (std::fclose(f_) != 0 && error_ == 0) error_ = errno;
  f_ = nullptr;
  return error_;
}

}  // namespace tw
