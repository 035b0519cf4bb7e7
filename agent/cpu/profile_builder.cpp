#include "agent/cpu/profile_builder.h"

#include <zlib.h>

#include <algorithm>

#include "agent/cpu/profile.pb.h"

namespace sonde::agent::cpu {
namespace {

Result<std::string> gzip(const std::string& data) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Error("gzip the profile: deflateInit2 failed");
  }
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  size_t written = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Error("gzip the profile: deflate failed");
  out.resize(written);
  return out;
}

}  // namespace

ProfileBuilder::ProfileBuilder(uint32_t frequency_hz)
    : period_ns_(1'000'000'000ull / std::max<uint32_t>(frequency_hz, 1)) {}

void ProfileBuilder::set_window(int64_t start_unix_ns, int64_t duration_ns) {
  start_unix_ns_ = start_unix_ns;
  duration_ns_ = duration_ns;
}

int64_t ProfileBuilder::intern(const std::string& s) {
  if (s.empty()) return 0;
  auto [it, inserted] = string_index_.emplace(s, static_cast<int64_t>(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

uint64_t ProfileBuilder::function_id(const std::string& name, const std::string& file) {
  std::pair<int64_t, int64_t> key{intern(name), intern(file)};
  auto [it, inserted] = function_index_.emplace(key, functions_.size() + 1);
  if (inserted) functions_.push_back({key.first, key.second});
  return it->second;
}

uint64_t ProfileBuilder::mapping_id(const std::string& module, const std::string& build_id) {
  std::pair<int64_t, int64_t> key{intern(module), intern(build_id)};
  auto [it, inserted] = mapping_index_.emplace(key, mappings_.size() + 1);
  if (inserted) mappings_.push_back({key.first, key.second});
  return it->second;
}

uint64_t ProfileBuilder::location_id(const stacks::Location& loc) {
  uint64_t mapping = mapping_id(loc.module, loc.build_id);
  LocationKey key{mapping, loc.address, loc.lines.empty() ? "" : loc.lines.front().function,
                  loc.lines.empty() ? "" : loc.lines.front().file,
                  loc.lines.empty() ? 0 : loc.lines.front().line};
  auto it = location_index_.find(key);
  if (it != location_index_.end()) return it->second;
  StoredLocation stored{mapping, loc.address, {}};
  for (const stacks::Line& line : loc.lines) {
    stored.lines.emplace_back(function_id(line.function, line.file), line.line);
  }
  locations_.push_back(std::move(stored));
  uint64_t id = locations_.size();
  location_index_.emplace(std::move(key), id);
  return id;
}

void ProfileBuilder::add(const SampleOwner& owner, std::span<const stacks::Location> stack,
                         uint64_t count) {
  std::vector<uint64_t> ids;
  ids.reserve(stack.size());
  for (const stacks::Location& loc : stack) ids.push_back(location_id(loc));
  samples_[{owner, std::move(ids)}] += count;
  total_ += count;
}

Result<std::string> ProfileBuilder::pprof_gzip() const {
  // Copies of the interned tables, because labels add strings of their own below.
  std::vector<std::string> strings = strings_;
  std::unordered_map<std::string, int64_t> index = string_index_;
  auto str = [&](const std::string& s) -> int64_t {
    if (s.empty()) return 0;
    auto [it, inserted] = index.emplace(s, static_cast<int64_t>(strings.size()));
    if (inserted) strings.push_back(s);
    return it->second;
  };

  pprof::Profile p;
  auto* samples_type = p.add_sample_type();
  samples_type->set_type(str("samples"));
  samples_type->set_unit(str("count"));
  auto* cpu_type = p.add_sample_type();
  cpu_type->set_type(str("cpu"));
  cpu_type->set_unit(str("nanoseconds"));
  p.mutable_period_type()->set_type(str("cpu"));
  p.mutable_period_type()->set_unit(str("nanoseconds"));
  p.set_period(static_cast<int64_t>(period_ns_));
  p.set_default_sample_type(str("cpu"));
  p.set_time_nanos(start_unix_ns_);
  p.set_duration_nanos(duration_ns_);

  for (size_t i = 0; i < mappings_.size(); ++i) {
    auto* m = p.add_mapping();
    m->set_id(i + 1);
    m->set_memory_limit(UINT64_MAX);
    m->set_filename(mappings_[i].file);
    m->set_build_id(mappings_[i].build_id);
    // Symbolized here: pprof tools must not try again from files they may not have.
    m->set_has_functions(true);
    m->set_has_filenames(true);
    m->set_has_line_numbers(true);
    m->set_has_inline_frames(true);
  }
  for (size_t i = 0; i < locations_.size(); ++i) {
    auto* l = p.add_location();
    l->set_id(i + 1);
    l->set_mapping_id(locations_[i].mapping);
    l->set_address(locations_[i].address);
    for (const auto& [function, line] : locations_[i].lines) {
      auto* ln = l->add_line();
      ln->set_function_id(function);
      ln->set_line(line);
    }
  }
  for (size_t i = 0; i < functions_.size(); ++i) {
    auto* f = p.add_function();
    f->set_id(i + 1);
    f->set_name(functions_[i].name);
    f->set_system_name(functions_[i].name);
    f->set_filename(functions_[i].file);
  }
  for (const auto& [key, count] : samples_) {
    const auto& [owner, ids] = key;
    auto* s = p.add_sample();
    for (uint64_t id : ids) s->add_location_id(id);
    s->add_value(static_cast<int64_t>(count));
    s->add_value(static_cast<int64_t>(count * period_ns_));
    auto label = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      auto* l = s->add_label();
      l->set_key(str(k));
      l->set_str(str(v));
    };
    auto* pid = s->add_label();
    pid->set_key(str("pid"));
    pid->set_num(owner.pid);
    label("namespace", owner.namespace_name);
    label("pod", owner.pod);
    label("container", owner.container);
    if (owner.blocked) label("blocked", "true");
  }
  for (const std::string& s : strings) p.add_string_table(s);

  std::string raw;
  if (!p.SerializeToString(&raw)) return Error("serialize the profile");
  return gzip(raw);
}

std::string ProfileBuilder::folded() const {
  std::map<std::string, uint64_t> lines;
  for (const auto& [key, count] : samples_) {
    const auto& ids = key.second;
    std::string line;
    // Root first: the outermost location, and in each location its outermost (physical) line.
    for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
      const StoredLocation& loc = locations_[*id - 1];
      for (auto l = loc.lines.rbegin(); l != loc.lines.rend(); ++l) {
        std::string name = strings_[static_cast<size_t>(functions_[l->first - 1].name)];
        std::replace(name.begin(), name.end(), ';', ':');  // ';' separates frames
        if (!line.empty()) line += ';';
        line += name;
      }
    }
    if (line.empty()) line = "[no stack]";
    lines[line] += count;
  }
  std::string out;
  for (const auto& [stack, count] : lines) out += stack + " " + std::to_string(count) + "\n";
  return out;
}

}  // namespace sonde::agent::cpu
