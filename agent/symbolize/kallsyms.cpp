#include "agent/symbolize/kallsyms.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/unique_fd.h"

namespace sonde::symbolize {
namespace {

// A real kernel lists ~1.2*10^5 symbols (more with many modules or BPF programs); 4M, 30 times
// that, bounds the table at ~60 MiB plus names. It also fits the sort key's 28 index bits.
constexpr size_t kMaxSymbols = size_t{1} << 22;
static_assert(kMaxSymbols <= size_t{1} << 28, "symbol indexes must fit the sort key");
constexpr size_t kMaxModules = 0xffff;
// Longest name the kernel prints (KSYM_NAME_LEN is 512 since 6.1); longer is not kallsyms.
constexpr size_t kMaxNameLength = 1024;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Tie-break rank among symbols at one address; the highest rank is the one lookups report.
uint32_t preference(char type, std::string_view name) {
  uint32_t rank = 0;
  if (type == 'W' || type == 'w' || type == 'V' || type == 'v') {
    rank = 8;
  } else if (type >= 'A' && type <= 'Z') {
    rank = 12;
  } else {
    rank = 4;
  }
  size_t underscores = 0;
  while (underscores < name.size() && underscores < 3 && name[underscores] == '_') ++underscores;
  return rank + static_cast<uint32_t>(3 - underscores);
}

Error line_error(size_t line, const char* what) {
  return Error("kallsyms line " + std::to_string(line) + ": " + what);
}

}  // namespace

Result<KallsymsTable> KallsymsTable::parse(std::string_view text) {
  if (text.size() > kMaxKallsymsBytes) {
    return Error("kallsyms: " + std::to_string(text.size()) + " bytes exceeds the " +
                     std::to_string(kMaxKallsymsBytes) + "-byte cap",
                 EFBIG);
  }
  // Parsed in file order first, then permuted into address order: /proc/kallsyms lists the
  // kernel image sorted but appends modules and BPF programs after it.
  struct Raw {
    uint64_t address;
    uint32_t name_offset;
    uint16_t module;
  };
  std::vector<Raw> raw;
  raw.reserve(text.size() / 32 + 1);
  std::vector<std::pair<uint64_t, uint32_t>> keys;
  keys.reserve(text.size() / 32 + 1);

  KallsymsTable table;
  table.names_.reserve(text.size() / 2 + 1);
  table.module_names_.emplace_back();
  std::string_view last_module;
  uint16_t last_module_index = 0;

  size_t pos = 0;
  size_t line_no = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;

    size_t i = 0;
    uint64_t address = 0;
    size_t digits = 0;
    for (; i < line.size(); ++i) {
      int d = hex_digit(line[i]);
      if (d < 0) break;
      if (++digits > 16) return line_error(line_no, "address longer than 64 bits");
      address = (address << 4) | static_cast<uint64_t>(d);
    }
    if (digits == 0 || i + 3 > line.size() || line[i] != ' ' || line[i + 2] != ' ') {
      return line_error(line_no, "expected '<hex address> <type> <name>'");
    }
    char type = line[i + 1];
    std::string_view rest = line.substr(i + 3);
    std::string_view name = rest;
    std::string_view module;
    if (size_t tab = rest.find('\t'); tab != std::string_view::npos) {
      name = rest.substr(0, tab);
      std::string_view m = rest.substr(tab + 1);
      if (m.size() < 3 || m.front() != '[' || m.back() != ']') {
        return line_error(line_no, "module not in [brackets]");
      }
      module = m.substr(1, m.size() - 2);
    }
    if (name.empty() || name.size() > kMaxNameLength) {
      return line_error(line_no, "empty or overlong symbol name");
    }
    if (name.find('\0') != std::string_view::npos) {
      return line_error(line_no, "NUL byte in symbol name");
    }

    uint16_t module_index = 0;
    if (!module.empty()) {
      // Module lines come grouped, so remembering the last one avoids a search per line.
      if (module == last_module) {
        module_index = last_module_index;
      } else {
        auto it = std::find(table.module_names_.begin(), table.module_names_.end(), module);
        if (it == table.module_names_.end()) {
          if (table.module_names_.size() >= kMaxModules) {
            return line_error(line_no, "too many modules");
          }
          table.module_names_.emplace_back(module);
          it = table.module_names_.end() - 1;
        }
        module_index = static_cast<uint16_t>(it - table.module_names_.begin());
        last_module = table.module_names_[module_index];
        last_module_index = module_index;
      }
    }

    if (raw.size() >= kMaxSymbols || table.names_.size() + name.size() + 2 > UINT32_MAX) {
      return Error(line_error(line_no, "more symbols than the cap").message(), EFBIG);
    }
    uint32_t index = static_cast<uint32_t>(raw.size());
    raw.push_back({address, static_cast<uint32_t>(table.names_.size()), module_index});
    table.names_.push_back(type);
    table.names_.append(name);
    table.names_.push_back('\0');
    // Within one address, ascending preference puts the preferred symbol last, which is where
    // the upper_bound lookup lands.
    keys.emplace_back(address, (preference(type, name) << 28) | index);
  }

  // On the common layout (addresses already ascending) only runs of equal addresses need
  // ordering by preference; anything else (modules below the kernel image) gets a full sort.
  auto by_address = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (std::is_sorted(keys.begin(), keys.end(), by_address)) {
    for (auto run = keys.begin(); run != keys.end();) {
      auto end =
          std::find_if(run, keys.end(), [&](const auto& k) { return k.first != run->first; });
      if (end - run > 1) std::sort(run, end);
      run = end;
    }
  } else {
    std::sort(keys.begin(), keys.end());
  }

  table.addresses_.resize(raw.size());
  table.name_offsets_.resize(raw.size());
  table.modules_.resize(raw.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const Raw& r = raw[keys[i].second & ((uint32_t{1} << 28) - 1)];
    table.addresses_[i] = r.address;
    table.name_offsets_[i] = r.name_offset;
    table.modules_[i] = r.module;
  }
  table.names_.shrink_to_fit();
  return table;
}

Result<std::string> read_proc_file(const std::string& path) {
  return read_proc_file(path, kMaxKallsymsBytes);
}

Result<std::string> read_proc_file(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error("open " + path, errno);
  std::string buffer;
  size_t used = 0;
  buffer.resize(size_t{1} << 20);
  for (;;) {
    if (used == buffer.size()) {
      if (used > max_bytes) {
        return Error(path + ": larger than the " + std::to_string(max_bytes) + "-byte cap", EFBIG);
      }
      buffer.resize(std::min(buffer.size() * 2, max_bytes + 1));
    }
    ssize_t n = ::read(fd.get(), buffer.data() + used, buffer.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("read " + path, errno);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  buffer.resize(used);
  return buffer;
}

Result<KallsymsTable> KallsymsTable::read(const std::string& proc_root) {
  std::string path = proc_root + "/kallsyms";
  ASSIGN_OR_RETURN(std::string text, read_proc_file(path));
  ASSIGN_OR_RETURN(KallsymsTable table, parse(text));
  if (table.size() > 0 && table.addresses_.back() == 0) {
    return Error(path +
                     ": all addresses are 0 (kptr_restrict hides them); run as root or with "
                     "CAP_SYSLOG",
                 EPERM);
  }
  return table;
}

std::optional<KernelSymbol> KallsymsTable::lookup(uint64_t address) const {
  auto it = std::upper_bound(addresses_.begin(), addresses_.end(), address);
  if (it == addresses_.begin()) return std::nullopt;
  KernelSymbol symbol = at(static_cast<size_t>(it - addresses_.begin()) - 1);
  symbol.offset = address - symbol.address;
  return symbol;
}

KernelSymbol KallsymsTable::at(size_t index) const {
  const char* entry = names_.data() + name_offsets_[index];
  KernelSymbol symbol;
  symbol.type = entry[0];
  symbol.name = std::string_view(entry + 1);
  symbol.module = module_names_[modules_[index]];
  symbol.address = addresses_[index];
  return symbol;
}

size_t KallsymsTable::table_bytes() const {
  return addresses_.capacity() * sizeof(uint64_t) + name_offsets_.capacity() * sizeof(uint32_t) +
         modules_.capacity() * sizeof(uint16_t);
}

}  // namespace sonde::symbolize
