// Test helpers around the Go program built for the symbolize tests: section bytes located with
// binutils' readelf (ground truth outside the code under test) and Go's own tools.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace sonde::symbolize::testing {

struct Section {
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

inline std::string run_command(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

inline std::optional<Section> readelf_section(const std::string& binary, const std::string& name) {
  std::istringstream in(run_command("readelf -SW '" + binary + "'"));
  std::string line;
  while (std::getline(in, line)) {
    auto bracket = line.find("] ");
    if (line.find('[') == std::string::npos || bracket == std::string::npos) continue;
    std::istringstream fields(line.substr(bracket + 2));
    std::string sec, type, addr, off, size;
    fields >> sec >> type >> addr >> off >> size;
    if (sec != name) continue;
    return Section{std::stoull(addr, nullptr, 16), std::stoull(off, nullptr, 16),
                   std::stoull(size, nullptr, 16)};
  }
  return std::nullopt;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Address of a symbol as `go tool nm` prints it, 0 when absent.
inline uint64_t go_nm_address(const std::string& tooldir, const std::string& binary,
                              const std::string& symbol) {
  std::istringstream in(run_command(tooldir + "/nm '" + binary + "'"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string addr, type, name;
    fields >> addr >> type;
    std::getline(fields >> std::ws, name);
    if (name == symbol) return std::stoull(addr, nullptr, 16);
  }
  return 0;
}

}  // namespace sonde::symbolize::testing
