#include "agent/stacks/perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "agent/symbols/tenant_file.h"
#include "common/unique_fd.h"

namespace sonde::agent::stacks {
namespace {

constexpr size_t kReadChunk = size_t{64} * 1024;

bool parse_hex(std::string_view& text, uint64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  if (ec != std::errc() || ptr == text.data()) return false;
  text.remove_prefix(static_cast<size_t>(ptr - text.data()));
  if (text.empty() || text.front() != ' ') return false;
  text.remove_prefix(1);
  return true;
}

}  // namespace

PerfMap PerfMap::parse(std::string_view text) {
  PerfMap map;
  std::vector<Entry> entries;
  while (!text.empty() && entries.size() < kMaxEntries) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    uint64_t start = 0;
    uint64_t size = 0;
    if (!parse_hex(line, start) || !parse_hex(line, size) || size == 0 || line.empty() ||
        start + size < start || map.names_.size() + line.size() > UINT32_MAX) {
      continue;
    }
    entries.push_back({start, size, static_cast<uint32_t>(map.names_.size()),
                       static_cast<uint32_t>(line.size())});
    map.names_.append(line);
  }
  // Stable, so that for equal starts the later line comes last and wins below.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
  for (const Entry& e : entries) {
    if (!map.entries_.empty() && map.entries_.back().start == e.start) {
      map.entries_.back() = e;
    } else {
      map.entries_.push_back(e);
    }
  }
  return map;
}

Result<PerfMap> PerfMap::read(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return errno_error("open " + path, errno);
  return read(fd.get(), path);
}

Result<UniqueFd> open_perf_map(const std::string& proc_root, pid_t pid, uint64_t nspid) {
  return symbols::open_in_root(proc_root, pid, "/tmp/perf-" + std::to_string(nspid) + ".map");
}

Result<PerfMap> PerfMap::read(int fd, const std::string& path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_error("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return Error(path + " is not a regular file");
  // Read straight into the string: callers may run on small thread stacks.
  std::string text;
  size_t used = 0;
  while (used < kMaxBytes) {
    text.resize(std::min(kMaxBytes, std::max<size_t>(used + kReadChunk, text.size())));
    ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read " + path, errno);
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  text.resize(used);
  // A line cut by the byte limit (or by the writer, mid-append) is not a whole entry.
  if (size_t nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl + 1);
  return parse(text);
}

std::optional<PerfMap::Symbol> PerfMap::lookup(uint64_t address) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return std::nullopt;
  --it;
  if (address - it->start >= it->size) return std::nullopt;
  return Symbol{std::string_view(names_).substr(it->name_offset, it->name_length), it->start};
}

size_t PerfMap::memory_bytes() const {
  return entries_.capacity() * sizeof(Entry) + names_.capacity();
}

}  // namespace sonde::agent::stacks
