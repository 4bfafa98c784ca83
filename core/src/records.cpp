#include "tensorwire/core/records.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "tensorwire/core/binary_file.hpp"

namespace tw {

std::vector<Record> read_records(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  unsigned char header[binary_file::kHeaderSize];
  const std::size_t n = std::fread(header, 1, sizeof header, f);
  const std::string bad = binary_file::check_header(header, n, kRecordsMagic, "records file", kRecordsVersion, sizeof(Record));
  if (!bad.empty()) {
    std::fclose(f);
    throw std::runtime_error(path + ": " + bad);
  }
  std::vector<Record> out;
  Record r;
  std::size_t got;
  while ((got = std::fread(&r, 1, sizeof r, f)) == sizeof r) {
    if (r.kind() < RecordKind::send || r.kind() > RecordKind::tcp_info) {
      std::fclose(f);
      throw std::runtime_error(path + ": record " + std::to_string(out.size()) + " is of unknown kind " +
                               std::to_string(static_cast<int>(r.kind())));
    }
    out.push_back(r);
  }
  std::fclose(f);
  if (got != 0) throw std::runtime_error(path + ": truncated record at the end (" + std::to_string(out.size()) + " whole)");
  return out;
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
