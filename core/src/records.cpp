#include "tensorwire/core/records.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tw {

std::vector<Record> read_records(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  char header[16];
  if (std::fread(header, 1, sizeof header, f) != sizeof header || std::memcmp(header, kRecordsMagic, 8) != 0) {
    std::fclose(f);
    throw std::runtime_error(path + ": not a tensorwire records file");
  }
  std::uint32_t size = 0;
  std::memcpy(&size, header + 12, 4);
  if (size != sizeof(Record)) {
    std::fclose(f);
    throw std::runtime_error(path + ": records of " + std::to_string(size) + " bytes; this tensorwire reads 64");
  }
  std::vector<Record> out;
  Record r;
  std::size_t got;
  while ((got = std::fread(&r, 1, sizeof r, f)) == sizeof r) out.push_back(r);
  std::fclose(f);
  if (got != 0) throw std::runtime_error(path + ": truncated record at the end (" + std::to_string(out.size()) + " whole)");
  return out;
}

RecordFile::RecordFile(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  if (f_ == nullptr) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  char header[16] = {};
  std::memcpy(header, kRecordsMagic, 8);
  const std::uint32_t version = 1, size = sizeof(Record);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &size, 4);
  if (std::fwrite(header, 1, sizeof header, f_) != sizeof header) error_ = errno;
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
