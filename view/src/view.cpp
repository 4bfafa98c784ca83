#include "tensorwire/view/view.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace tw::view {

StrId View::intern(std::string_view s) {
  if (s.empty()) return 0;
  const auto it = ids_.find(std::string(s));
  if (it != ids_.end()) return it->second;
  const StrId id = static_cast<StrId>(strings.size());
  strings.emplace_back(s);
  ids_.emplace(std::string(s), id);
  return id;
}

std::uint64_t View::add_process(int pid, std::string name) {
  processes.push_back({next_uuid_++, pid, std::move(name)});
  return processes.back().uuid;
}

std::uint32_t View::add_track(std::uint64_t parent, std::string name, TrackKind kind, std::string unit) {
  Track t;
  t.uuid = next_uuid_++;
  t.parent = parent;
  t.name = std::move(name);
  t.kind = kind;
  t.unit = std::move(unit);
  tracks.push_back(std::move(t));
  return static_cast<std::uint32_t>(tracks.size() - 1);
}

SliceRef View::add_slice(std::uint32_t track, Nanos begin, Nanos end, StrId name, std::uint32_t depth, StrId category) {
  auto& s = tracks.at(track).slices;
  Slice x;
  x.begin = begin;
  x.end = end;
  x.name = name;
  x.category = category;
  x.depth = depth;
  x.args = static_cast<std::uint32_t>(args.size());
  s.push_back(x);
  return {track, static_cast<std::uint32_t>(s.size() - 1)};
}

bool View::link(SliceRef from, SliceRef to) {
  const Nanos back = tracks.at(from.track).slices.at(from.slice).begin - tracks.at(to.track).slices.at(to.slice).end;
  if (back >= 0) {
    ++unlinked;
    unlinked_by = std::max(unlinked_by, back);
    return false;
  }
  flows.push_back({from, to});
  return true;
}

void View::add_arg(SliceRef r, std::string_view key, std::int64_t value) {
  Slice& s = tracks[r.track].slices[r.slice];
  if (s.args + s.nargs != args.size()) throw std::logic_error("view: args must follow their slice");
  args.push_back({intern(key), false, value});
  ++s.nargs;
}

void View::add_arg(SliceRef r, std::string_view key, std::string_view value) {
  Slice& s = tracks[r.track].slices[r.slice];
  if (s.args + s.nargs != args.size()) throw std::logic_error("view: args must follow their slice");
  args.push_back({intern(key), true, static_cast<std::int64_t>(intern(value))});
  ++s.nargs;
}

void View::absorb(View o, const std::string& prefix, Nanos shift) {
  const std::uint64_t base = next_uuid_;
  std::uint64_t top = 0;
  const auto moved = [&](std::uint64_t u) { return u ? u - 1 + base : 0; };
  for (Process& p : o.processes) {
    top = std::max(top, p.uuid);
    processes.push_back({moved(p.uuid), p.pid, prefix + p.name});
  }
  const std::uint32_t first_track = static_cast<std::uint32_t>(tracks.size());
  std::vector<StrId> str(o.strings.size(), 0);
  for (std::size_t i = 1; i < o.strings.size(); ++i) str[i] = intern(o.strings[i]);
  const std::uint32_t arg_base = static_cast<std::uint32_t>(args.size());
  for (Arg a : o.args) {
    a.key = str[a.key];
    if (a.text) a.value = str[static_cast<std::size_t>(a.value)];
    args.push_back(a);
  }
  for (Track& t : o.tracks) {
    top = std::max(top, t.uuid);
    t.uuid = moved(t.uuid);
    if (t.parent == 0) t.name = prefix + t.name;
    t.parent = moved(t.parent);
    for (Slice& s : t.slices) {
      s.begin += shift, s.end += shift;
      s.name = str[s.name], s.category = str[s.category];
      s.args += arg_base;
    }
    for (auto& x : t.samples) x.first += shift;
    tracks.push_back(std::move(t));
  }
  for (Arrow f : o.flows) {
    f.from.track += first_track, f.to.track += first_track;
    flows.push_back(f);
  }
  unlinked += o.unlinked;
  unlinked_by = std::max(unlinked_by, o.unlinked_by);
  next_uuid_ = base + top;
}

Nanos View::first_time() const {
  Nanos t = std::numeric_limits<Nanos>::max();
  for (const Track& k : tracks) {
    if (!k.slices.empty()) t = std::min(t, k.slices.front().begin);
    if (!k.samples.empty()) t = std::min(t, k.samples.front().first);
  }
  return t == std::numeric_limits<Nanos>::max() ? 0 : t;
}

std::size_t View::slice_count() const {
  std::size_t n = 0;
  for (const Track& t : tracks) n += t.slices.size();
  return n;
}

std::size_t View::sample_count() const {
  std::size_t n = 0;
  for (const Track& t : tracks) n += t.samples.size();
  return n;
}

std::uint32_t Lanes::place(Nanos begin, Nanos end) {
  std::size_t lane = tracks_.size();
  if (!free_.empty() && free_.top().first <= begin) {
    lane = free_.top().second;
    free_.pop();
  } else {
    tracks_.push_back(v_.add_track(group_, name_, TrackKind::slices));
  }
  free_.emplace(std::max(end, begin), lane);
  return tracks_[lane];
}

std::vector<std::pair<Nanos, double>> downsample(std::vector<std::pair<Nanos, double>> s, Nanos bin, bool peak) {
  if (s.empty() || bin <= 1) return s;
  std::stable_sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<Nanos, double>> out;
  const Nanos origin = s.front().first;
  std::size_t i = 0;
  while (i < s.size()) {
    const Nanos b = (s[i].first - origin) / bin;
    std::size_t j = i;
    double v = s[i].second;
    while (j < s.size() && (s[j].first - origin) / bin == b) {
      v = peak ? std::max(v, s[j].second) : s[j].second;
      ++j;
    }
    // The bin's first time, so that a value shows from when it held.
    if (out.empty() || out.back().second != v) out.emplace_back(s[i].first, v);
    i = j;
  }
  // The last value holds to the last sample.
  if (out.back().first != s.back().first) out.emplace_back(s.back().first, out.back().second);
  return out;
}

std::string check(const View& v) {
  for (std::size_t ti = 0; ti < v.tracks.size(); ++ti) {
    const Track& t = v.tracks[ti];
    const auto where_ = [&] { return "track " + std::to_string(ti) + " (" + t.name + ")"; };
    if (t.kind != TrackKind::slices && !t.slices.empty()) return where_() + ": slices on a track that is not a slice track";
    if (t.kind != TrackKind::counter && !t.samples.empty()) return where_() + ": samples on a track that is not a counter";
    std::vector<const Slice*> open;  // open[d]: the last slice of depth d
    std::vector<Nanos> last_end;    // per depth: where the previous sibling ended
    for (std::size_t i = 0; i < t.slices.size(); ++i) {
      const Slice& s = t.slices[i];
      const auto at_ = [&] { return where_() + " slice " + std::to_string(i); };
      if (s.end < s.begin) return at_() + ": ends before it begins";
      if (s.depth > open.size()) return at_() + ": depth " + std::to_string(s.depth) + " without a parent";
      open.resize(s.depth);
      last_end.resize(s.depth + 1, std::numeric_limits<Nanos>::min());
      if (s.begin < last_end[s.depth]) return at_() + ": overlaps the slice before it";
      if (s.depth > 0 && (s.begin < open.back()->begin || s.end > open.back()->end)) return at_() + ": outside its parent";
      last_end[s.depth] = s.end;
      open.push_back(&s);
      if (s.args + s.nargs > v.args.size()) return at_() + ": args out of range";
    }
    for (std::size_t i = 1; i < t.samples.size(); ++i) {
      if (t.samples[i].first < t.samples[i - 1].first) return where_() + ": samples out of time order";
    }
  }
  for (std::size_t i = 0; i < v.flows.size(); ++i) {
    for (const SliceRef& r : {v.flows[i].from, v.flows[i].to}) {
      if (r.track >= v.tracks.size() || r.slice >= v.tracks[r.track].slices.size()) {
        return "flow " + std::to_string(i) + ": names no slice";
      }
    }
    if (v.tracks[v.flows[i].to.track].slices[v.flows[i].to.slice].end <= v.tracks[v.flows[i].from.track].slices[v.flows[i].from.slice].begin) {
      return "flow " + std::to_string(i) + ": ends before it begins";
    }
  }
  return "";
}

}  // namespace tw::view
