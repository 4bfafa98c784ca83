#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/util/output_path.hpp"

namespace tw {
namespace {

bool plain_safe(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return false;
  const char c0 = s.front();
  if (c0 == '-' || c0 == '?' || c0 == ':' || c0 == '#' || c0 == '@' || c0 == '`' || c0 == '!' || c0 == '&' ||
      c0 == '*' || c0 == '|' || c0 == '>' || c0 == '%' || c0 == '\'' || c0 == '"' || c0 == ' ') {
    return false;
  }
  if (s.back() == ' ' || s.back() == ':') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f) return false;
    // Flow indicators, and ": " / " #" which end a plain scalar.
    if (c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '"' || c == '\'') return false;
    if (c == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return false;
    if (c == '#' && i > 0 && s[i - 1] == ' ') return false;
  }
  return true;
}

// A scalar safe in flow context: plain when possible, else double-quoted.
std::string scalar(std::string_view s) {
  if (plain_safe(s)) return std::string(s);
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

void kv(std::string& out, const char* key, std::string_view value, bool first = false) {
  if (!first) out += ", ";
  out += key;
  out += ": ";
  out += value;
}

// `, key: [d0, d1, ...]`, nothing when empty.
void durations_list(std::string& out, const char* key, const std::vector<Nanos>& v) {
  if (v.empty()) return;
  out += ", ";
  out += key;
  out += ": [";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    out += format_duration(v[i]);
  }
  out += "]";
}

}  // namespace

std::string dependency_ref(const Profile& p, const Dependency& d) {
  std::string s = d.recv ? "recv:" : "";
  s += p.ops[d.op].id;
  if (d.iterations_back > 0) s += "@-" + std::to_string(d.iterations_back);
  return s;
}

std::string write_profile_yaml(const Profile& p) {
  std::string out;
  out.reserve(128 + p.ops.size() * 120);
  out += "# tensorwire traffic profile; format: docs/profile-format.md\n";
  out += "version: " + std::to_string(p.version) + "\n";
  const Metadata& m = p.metadata;
  const std::pair<const char*, const std::string*> meta[] = {
      {"source", &m.source},           {"framework", &m.framework}, {"pattern", &m.pattern},
      {"model", &m.model},             {"description", &m.description}, {"created", &m.created},
      {"generator", &m.generator}};
  bool any_meta = false;
  for (const auto& [k, v] : meta) any_meta = any_meta || !v->empty();
  if (any_meta) {
    out += "metadata:\n";
    for (const auto& [k, v] : meta) {
      if (!v->empty()) out += std::string("  ") + k + ": " + scalar(*v) + "\n";
    }
  }
  out += "iterations: " + std::to_string(p.iterations) + "\n";
  out += std::string("iteration_barrier: ") + (p.iteration_barrier ? "true" : "false") + "\n";
  out += "ranks:\n";
  for (const Rank& r : p.ranks) {
    out += "  - {id: " + std::to_string(r.id);
    if (!r.host.empty()) kv(out, "host", scalar(r.host));
    kv(out, "role", role_name(r.role));
    out += "}\n";
  }
  out += "flows:\n";
  for (const Flow& f : p.flows) {
    out += "  - {";
    kv(out, "id", scalar(f.id), true);
    kv(out, "src", std::to_string(f.src));
    kv(out, "dst", std::to_string(f.dst));
    if (f.read_lag != 0) kv(out, "read_lag", format_duration(f.read_lag));
    out += "}\n";
  }
  if (!p.tensors.empty()) {
    out += "tensors:\n";
    for (const Tensor& t : p.tensors) {
      out += "  - {";
      kv(out, "name", scalar(t.name), true);
      kv(out, "bytes", std::to_string(t.bytes));
      if (!t.bucket.empty()) kv(out, "bucket", scalar(t.bucket));
      if (!t.dtype.empty()) kv(out, "dtype", scalar(t.dtype));
      out += "}\n";
    }
  }
  out += "ops:\n";
  for (const Op& op : p.ops) {
    out += "  - {";
    kv(out, "id", scalar(op.id), true);
    kv(out, "type", op_type_name(op.type));
    if (op.type == OpType::compute) {
      kv(out, "rank", std::to_string(op.rank));
      kv(out, "duration", format_duration(op.duration));
      durations_list(out, "durations", op.durations);
    } else {
      kv(out, "flow", scalar(p.flows[op.flow].id));
      kv(out, "bytes", std::to_string(op.bytes));
      if (!op.tensor.empty()) kv(out, "tensor", scalar(op.tensor));
      if (op.priority != 0) kv(out, "priority", std::to_string(op.priority));
    }
    if (!op.label.empty()) kv(out, "label", scalar(op.label));
    if (op.gap != 0) kv(out, "gap", format_duration(op.gap));
    durations_list(out, "gaps", op.gaps);
    if (!op.after.empty()) {
      out += ", after: [";
      for (std::size_t i = 0; i < op.after.size(); ++i) {
        if (i > 0) out += ", ";
        out += scalar(dependency_ref(p, op.after[i]));
      }
      out += "]";
    }
    out += "}\n";
  }
  if (p.observed) {
    const Observed& o = *p.observed;
    out += "observed:\n";
    if (!o.source.empty()) out += "  source: " + scalar(o.source) + "\n";
    if (!o.iterations.empty()) {
      out += "  iterations:\n";
      for (const auto& it : o.iterations) {
        out += "    - {duration: " + format_duration(it.duration);
        if (!it.rank_durations.empty()) {
          out += ", ranks: [";
          for (std::size_t i = 0; i < it.rank_durations.size(); ++i) {
            out += (i > 0 ? ", " : "") + format_duration(it.rank_durations[i]);
          }
          out += "]";
        }
        out += "}\n";
      }
    }
    if (!o.ops_file.empty() && o.ops.empty()) {
      out += "  ops_file: " + scalar(o.ops_file) + "\n";  // written next to it by save_profile_with_sidecar
    } else if (!o.ops_file.empty()) {
      // The sidecar's rows were merged into o.ops on load; they are written back
      // inline, since the sidecar travels with the file it was read from.
      out += "  # observed ops originally from " + scalar(o.ops_file) + "\n";
    }
    if (!o.ops.empty()) {
      out += "  ops:\n";
      for (const auto& x : o.ops) {
        out += "    - {op: " + scalar(p.ops[x.op].id) + ", iteration: " + std::to_string(x.iteration) +
               ", start: " + format_duration(x.start) + ", end: " + format_duration(x.end) + "}\n";
      }
    }
  }
  return out;
}

void write_file_atomic(const std::string& path, std::string_view text) {
  if (written_in_place(path)) {  // /dev/null, /dev/stdout, a FIFO: never replaced
    write_in_place(path, text);
    return;
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
  const std::size_t written = std::fwrite(text.data(), 1, text.size(), f);
  const int write_errno = errno;
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int flush_errno = errno;
  std::fclose(f);
  if (written != text.size() || !flushed) {
    std::remove(tmp.c_str());
    const int e = written != text.size() ? write_errno : flush_errno;
    throw std::runtime_error(path + ": cannot write: " + std::strerror(e));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot write: " + std::strerror(e));
  }
}

void write_private_file_atomic(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
  const auto fail = [&](int e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot write: " + std::strerror(e));
  };
  // Mode 0600 whatever the umask.
  if (::fchmod(fd, 0600) != 0) fail(errno);
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot write: " + std::strerror(e));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot write: " + std::strerror(e));
  }
}

void save_profile(const Profile& profile, const std::string& path) { write_file_atomic(path, write_profile_yaml(profile)); }

std::string save_profile_with_sidecar(const Profile& profile, const std::string& path, std::size_t inline_limit) {
  if (!profile.observed || profile.observed->ops.size() <= inline_limit) {
    save_profile(profile, path);
    return {};
  }
  std::filesystem::path file(path);
  const std::string name = file.stem().string() + ".observed.csv";
  const std::string sidecar = (file.parent_path() / name).string();
  std::string csv = "iteration,op,start_ns,end_ns\n";
  for (const ObservedOp& x : profile.observed->ops) {
    csv += std::to_string(x.iteration) + "," + profile.ops[x.op].id + "," + std::to_string(x.start) + "," + std::to_string(x.end) + "\n";
  }
  write_file_atomic(sidecar, csv);
  Profile p = profile;
  p.observed->ops.clear();
  p.observed->ops_file = name;
  save_profile(p, path);
  return sidecar;
}

}  // namespace tw
