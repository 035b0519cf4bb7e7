#include "agent/symbols/tests/ground_truth.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>

namespace sonde::symbols::testing {
namespace {

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

uint64_t parse_hex(const std::string& s) {
  return std::stoull(s, nullptr, 16);
}

// readelf prints sizes in decimal, switching to 0x-prefixed hex for large ones.
uint64_t parse_size(const std::string& s) {
  return s.rfind("0x", 0) == 0 ? std::stoull(s, nullptr, 16) : std::stoull(s, nullptr, 10);
}

}  // namespace

std::string run_command(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  EXPECT_NE(p, nullptr) << command;
  if (p == nullptr) return "";
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << command;
  return out;
}

std::vector<ReadelfSymbol> readelf_functions(const std::string& path, const std::string& name) {
  // node's table is 180k lines; list it once per path and test binary.
  static std::map<std::string, std::string> listings;
  auto [it, inserted] = listings.try_emplace(path);
  if (inserted) it->second = run_command("readelf -sW '" + path + "'");
  std::vector<ReadelfSymbol> out;
  std::istringstream in(it->second);
  for (std::string line; std::getline(in, line);) {
    auto f = split_ws(line);
    // "Num: Value Size Type Bind Vis Ndx Name"
    if (f.size() < 8 || f[7] != name || f[3] != "FUNC" || f[6] == "UND") continue;
    out.push_back(ReadelfSymbol{parse_hex(f[1]), parse_size(f[2]), f[3], f[4], f[6]});
  }
  return out;
}

std::vector<ReadelfLoad> readelf_loads(const std::string& path) {
  std::vector<ReadelfLoad> out;
  std::istringstream in(run_command("readelf -lW '" + path + "'"));
  for (std::string line; std::getline(in, line);) {
    auto f = split_ws(line);
    // "LOAD Offset VirtAddr PhysAddr FileSiz MemSiz Flg... Align"
    if (f.size() < 7 || f[0] != "LOAD") continue;
    const std::string flags = line.substr(line.find(f[5]) + f[5].size());
    out.push_back(ReadelfLoad{parse_hex(f[1]), parse_hex(f[2]), parse_hex(f[4]),
                              flags.find('E') != std::string::npos});
  }
  return out;
}

ReadelfSection readelf_section(const std::string& path, const std::string& index) {
  std::istringstream in(run_command("readelf -SW '" + path + "'"));
  for (std::string line; std::getline(in, line);) {
    // "  [13] .text  PROGBITS  0000000000b72000 772000 1a8bca0 00  AX  0   0 64"
    const auto open = line.find('[');
    const auto close = line.find(']');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    auto idx = split_ws(line.substr(open + 1, close - open - 1));
    if (idx.size() != 1 || idx[0] != index) continue;
    auto f = split_ws(line.substr(close + 1));
    if (f.size() < 4) continue;
    return ReadelfSection{parse_hex(f[2]), parse_hex(f[3])};
  }
  ADD_FAILURE() << "readelf -SW " << path << " has no section " << index;
  return {};
}

std::string readelf_build_id(const std::string& path) {
  std::istringstream in(run_command("readelf -nW '" + path + "' 2>/dev/null"));
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("Build ID: ");
    if (at != std::string::npos) return split_ws(line.substr(at + 10)).at(0);
  }
  return "";
}

ObjdumpSites objdump_sites(const std::string& path, uint64_t start, uint64_t size) {
  char range[96];
  std::snprintf(range, sizeof(range), "--start-address=0x%llx --stop-address=0x%llx",
                static_cast<unsigned long long>(start),
                static_cast<unsigned long long>(start + size));
  std::istringstream in(
      run_command("objdump -d --no-show-raw-insn " + std::string(range) + " '" + path + "'"));
  ObjdumpSites out;
  for (std::string line; std::getline(in, line);) {
    // " 18b91ec:\tret" — an address, a colon and a tab start every instruction line.
    const auto colon = line.find(":\t");
    if (colon == std::string::npos) continue;
    const std::string addr_text =
        split_ws(line.substr(0, colon)).empty() ? "" : split_ws(line.substr(0, colon)).front();
    if (addr_text.empty() || addr_text.find_first_not_of("0123456789abcdef") != std::string::npos) {
      continue;
    }
    const uint64_t addr = parse_hex(addr_text);
    auto f = split_ws(line.substr(colon + 2));
    if (f.empty()) continue;
    ++out.instructions;
    size_t m = 0;
    while (m + 1 < f.size() && (f[m] == "bnd" || f[m] == "notrack" || f[m] == "rep" ||
                                f[m] == "repz" || f[m] == "ds" || f[m] == "cs")) {
      ++m;
    }
    const std::string& mnemonic = f[m];
    const auto offset = static_cast<uint32_t>(addr - start);
    if (mnemonic.rfind("ret", 0) == 0) {
      out.returns.push_back(offset);
    } else if (mnemonic[0] == 'j') {
      const std::string operand = m + 1 < f.size() ? f[m + 1] : "";
      bool leaves = true;
      if (!operand.empty() && operand[0] != '*') {
        const uint64_t target = parse_hex(operand);
        leaves = target < start || target >= start + size;
      }
      if (leaves) out.exit_jumps.push_back(offset);
    }
  }
  return out;
}

}  // namespace sonde::symbols::testing
