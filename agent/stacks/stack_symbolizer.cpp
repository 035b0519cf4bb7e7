#include "agent/stacks/stack_symbolizer.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>

#include "agent/discovery/proc_reader.h"
#include "agent/symbolize/elf_symbolizer.h"
#include "agent/symbols/binary_identity.h"
#include "common/log.h"
#include "common/unique_fd.h"

namespace sonde::agent::stacks {
namespace {

// Frames of inlined calls kept per address.
constexpr size_t kMaxInlineDepth = 16;

std::string hex(uint64_t v) {
  char buf[24];
  (void)std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool parse_hex_field(std::string_view& s, uint64_t& out, char end) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (ec != std::errc() || ptr == s.data() || ptr == s.data() + s.size() || *ptr != end) {
    return false;
  }
  s.remove_prefix(static_cast<size_t>(ptr - s.data()) + 1);
  return true;
}

std::string_view next_field(std::string_view& s) {
  size_t sp = s.find(' ');
  std::string_view f = s.substr(0, sp);
  s.remove_prefix(sp == std::string_view::npos ? s.size() : sp + 1);
  return f;
}

// 0 when the process is gone or its stat is unreadable: never a live process's start time.
uint64_t read_start_time(const std::string& proc_root, pid_t pid) {
  auto t = ProcReader(proc_root).start_time(pid);
  return t.ok() ? *t : 0;
}

// The pid in the process's own (innermost) pid namespace: the last NSpid entry.
uint64_t read_nspid(const std::string& proc_root, pid_t pid) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    size_t last = line.find_last_of(" \t");
    uint64_t v = 0;
    if (last != std::string::npos) {
      std::from_chars(line.data() + last + 1, line.data() + line.size(), v);
    }
    return v;
  }
  return static_cast<uint64_t>(pid);  // kernels before 4.1 have no NSpid: no namespaces seen
}

}  // namespace

std::optional<MapsLine> parse_maps_line(std::string_view line) {
  MapsLine m;
  if (!parse_hex_field(line, m.start, '-') || !parse_hex_field(line, m.end, ' ')) {
    return std::nullopt;
  }
  std::string_view perms = next_field(line);
  if (perms.size() < 4) return std::nullopt;
  m.executable = perms[2] == 'x';
  if (!parse_hex_field(line, m.pgoff, ' ')) return std::nullopt;
  next_field(line);  // device
  next_field(line);  // inode
  size_t path = line.find_first_not_of(' ');
  if (path != std::string_view::npos) m.path = std::string(line.substr(path));
  if (m.end <= m.start) return std::nullopt;
  return m;
}

void StackSymbolizer::refresh() {
  ++round_;
  while (!lru_.empty() && lru_.back().round + kIdleRounds < round_) {
    processes_.erase(lru_.back().pid);
    lru_.pop_back();
  }
  if (kernel_) {
    if (auto r = kernel_->poll(0); !r.ok()) {
      log::warn("cpu profiles: kernel symbol updates", {{"error", r.error().message()}});
    }
  }
}

StackSymbolizer::Process& StackSymbolizer::process(pid_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    Process& p = *it->second;
    if (p.round != round_) {
      p.round = round_;
      uint64_t start = read_start_time(proc_root_, pid);
      if (start != 0 && start != p.start_time) {  // the pid was reused
        Process fresh;
        fresh.pid = pid;
        fresh.start_time = start;
        fresh.round = round_;
        p = std::move(fresh);
      }
    }
    return p;
  }
  while (lru_.size() >= kMaxProcesses) {
    processes_.erase(lru_.back().pid);
    lru_.pop_back();
  }
  Process p;
  p.pid = pid;
  p.start_time = read_start_time(proc_root_, pid);
  p.round = round_;
  lru_.push_front(std::move(p));
  processes_.emplace(pid, lru_.begin());
  return lru_.front();
}

void StackSymbolizer::forget(pid_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  lru_.erase(it->second);
  processes_.erase(it);
}

void StackSymbolizer::read_maps(Process& p) {
  p.maps_round = round_;
  std::ifstream in(proc_root_ + "/" + std::to_string(p.pid) + "/maps");
  if (!in) return;  // exited: keep what we had, the frames of its last samples still resolve
  std::vector<Mapping> fresh;
  for (std::string line; std::getline(in, line) && fresh.size() < kMaxMappings;) {
    auto m = parse_maps_line(line);
    if (!m || !m->executable) continue;
    Mapping mapping;
    mapping.start = m->start;
    mapping.end = m->end;
    mapping.pgoff = m->pgoff;
    mapping.path = std::move(m->path);
    // Keep what was resolved for a mapping that is still there.
    for (Mapping& old : p.mappings) {
      if (old.start == mapping.start && old.end == mapping.end && old.path == mapping.path &&
          old.pgoff == mapping.pgoff) {
        mapping = std::move(old);
        break;
      }
    }
    fresh.push_back(std::move(mapping));
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  p.mappings = std::move(fresh);
}

bool StackSymbolizer::is_own_vdso(const Process& p, const Mapping& m) {
  if (!vdso_read_) {
    vdso_read_ = true;
    auto own = Vdso::own();
    if (own.ok()) {
      vdso_ = std::move(own).value();
    } else {
      log::info("[vdso] frames stay unnamed", {{"error", own.error().message()}});
    }
  }
  if (!vdso_ || m.end - m.start != vdso_->size()) return false;
  std::vector<uint8_t> image(vdso_->size());
  UniqueFd mem(
      ::open((proc_root_ + "/" + std::to_string(p.pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem.valid()) return false;
  const ssize_t n = ::pread(mem.get(), image.data(), image.size(), static_cast<off_t>(m.start));
  return n == static_cast<ssize_t>(image.size()) && vdso_->same_image(image);
}

void StackSymbolizer::open_mapping(const Process& p, Mapping& m) {
  m.opened = true;
  if (m.path == "[vdso]") m.own_vdso = is_own_vdso(p, m);
  if (m.path.empty() || m.path.front() != '/') return;
  // map_files/ opens the very file that is mapped, in whatever mount namespace, even when it
  // has been deleted or replaced since.
  char range[64];
  (void)std::snprintf(range, sizeof range, "/%llx-%llx", static_cast<unsigned long long>(m.start),
                      static_cast<unsigned long long>(m.end));
  std::string path = proc_root_ + "/" + std::to_string(p.pid) + "/map_files" + range;
  auto binary = symbols::OpenBinary::open(path);
  if (!binary.ok()) return;
  auto elf = symbols::ElfFile::parse(binary->bytes());
  if (!elf.ok()) return;
  for (size_t i = 0; i < elf->segment_count(); ++i) {
    symbols::ElfSegment seg = elf->segment(i);
    if (seg.type == PT_LOAD) m.loads.push_back(seg);
  }
  if (auto id = elf->build_id()) m.build_id = id->to_string();
  auto symbolizer = binaries_.get(path);
  if (symbolizer.ok()) m.symbolizer = std::move(symbolizer).value();
}

const StackSymbolizer::Mapping* StackSymbolizer::find_mapping(Process& p, uint64_t address) {
  auto find = [&]() -> Mapping* {
    auto it = std::upper_bound(p.mappings.begin(), p.mappings.end(), address,
                               [](uint64_t a, const Mapping& m) { return a < m.start; });
    if (it == p.mappings.begin()) return nullptr;
    --it;
    return address < it->end ? &*it : nullptr;
  };
  Mapping* m = find();
  if (!m && p.maps_round != round_) {
    read_maps(p);
    m = find();
  }
  if (m && !m->opened) open_mapping(p, *m);
  return m;
}

void StackSymbolizer::maybe_read_perf_map(Process& p) {
  if (p.perf_map_round == round_) return;
  p.perf_map_round = round_;
  uint64_t nspid = read_nspid(proc_root_, p.pid);
  auto fd = open_perf_map(proc_root_, p.pid, nspid);
  if (!fd.ok()) return;
  struct stat st {};
  if (fstat(fd->get(), &st) != 0 || st.st_size == p.perf_map_size) return;
  auto map = PerfMap::read(fd->get(), "perf map of pid " + std::to_string(p.pid));
  if (!map.ok()) return;
  p.perf_map = std::move(map).value();
  p.perf_map_size = st.st_size;
}

Location StackSymbolizer::user_location(Process& p, uint64_t address) {
  Location loc;
  loc.address = address;
  const Mapping* m = find_mapping(p, address);
  if (!m || m->path.empty() || m->path.front() != '/') {
    // Anonymous executable memory: JIT code, if the runtime says what it is.
    bool special = m && !m->path.empty();  // [vdso], [vsyscall], ...
    loc.module = special ? m->path : "[jit]";
    if (m && m->own_vdso) {
      if (auto name = vdso_->function_at(address - m->start)) {
        loc.lines.push_back({std::string(*name), "", 0});
        return loc;
      }
    }
    if (!special) {
      if (!p.perf_map || !p.perf_map->lookup(address)) maybe_read_perf_map(p);
      if (p.perf_map) {
        if (auto sym = p.perf_map->lookup(address)) {
          loc.lines.push_back({std::string(sym->name), "", 0});
          return loc;
        }
      }
    }
    loc.lines.push_back(
        {(m ? loc.module : "[unknown]") + "+" + hex(m ? address - m->start : address), "", 0});
    return loc;
  }
  loc.module = m->path;
  loc.build_id = m->build_id;
  uint64_t file_offset = address - m->start + m->pgoff;
  std::optional<uint64_t> vaddr;
  for (const auto& seg : m->loads) {
    if (file_offset >= seg.offset && file_offset - seg.offset < seg.filesz) {
      vaddr = file_offset - seg.offset + seg.vaddr;
      break;
    }
  }
  if (vaddr && m->symbolizer) {
    loc.address = *vaddr;
    symbolize::SymbolizedFrame frames[kMaxInlineDepth];
    size_t n = m->symbolizer->symbolize(*vaddr, frames);
    for (size_t i = 0; i < n; ++i) {
      loc.lines.push_back(
          {symbolize::demangle(frames[i].function), std::string(frames[i].file), frames[i].line});
    }
    if (n > 0) return loc;
  }
  loc.lines.push_back({basename_of(m->path) + "+" + hex(file_offset), "", 0});
  return loc;
}

Location StackSymbolizer::kernel_location(uint64_t address) {
  Location loc;
  loc.module = "[kernel.kallsyms]";
  loc.address = address;
  if (kernel_) {
    if (auto sym = kernel_->lookup(address)) {
      if (!sym->module.empty()) loc.module = "[" + std::string(sym->module) + "]";
      loc.lines.push_back({std::string(sym->name), "", 0});
      return loc;
    }
  }
  loc.lines.push_back({"[kernel]+" + hex(address), "", 0});
  return loc;
}

std::vector<Location> StackSymbolizer::symbolize(pid_t pid, std::span<const uint64_t> user,
                                                 std::span<const uint64_t> kernel) {
  std::vector<Location> out;
  out.reserve(user.size() + kernel.size());
  for (uint64_t ip : kernel) out.push_back(kernel_location(ip));
  if (!user.empty()) {
    Process& p = process(pid);
    for (size_t i = 0; i < user.size(); ++i) {
      // Return addresses point after the call: look up the call instruction itself (the leaf
      // is the interrupted instruction and stays as is).
      uint64_t ip = i == 0 ? user[i] : user[i] - 1;
      out.push_back(user_location(p, ip));
    }
  }
  return out;
}

}  // namespace sonde::agent::stacks
