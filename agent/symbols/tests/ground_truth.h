// Ground truth for the symbol engine's tests, taken from binutils (readelf, objdump) rather
// than from the code under test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sonde::symbols::testing {

// stdout of a shell command; aborts the test binary's assertion when it cannot start.
std::string run_command(const std::string& command);

struct ReadelfSymbol {
  uint64_t value = 0;
  uint64_t size = 0;
  std::string type;
  std::string bind;
  std::string ndx;
};

// Defined FUNC entries named exactly name in `readelf -sW path`, both tables.
std::vector<ReadelfSymbol> readelf_functions(const std::string& path, const std::string& name);

struct ReadelfLoad {
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  bool executable = false;
};
// LOAD rows of `readelf -lW path`.
std::vector<ReadelfLoad> readelf_loads(const std::string& path);

struct ReadelfSection {
  uint64_t addr = 0;
  uint64_t offset = 0;
};
// Section number index of `readelf -SW path`.
ReadelfSection readelf_section(const std::string& path, const std::string& index);

// The "Build ID:" of `readelf -nW path`, or "" when there is none.
std::string readelf_build_id(const std::string& path);

struct ObjdumpSites {
  std::vector<uint32_t> returns;     // offsets of ret instructions from start
  std::vector<uint32_t> exit_jumps;  // jumps whose target is outside [start, end) or indirect
  size_t instructions = 0;
};
// Disassembles [start, start + size) of path with `objdump -d`.
ObjdumpSites objdump_sites(const std::string& path, uint64_t start, uint64_t size);

}  // namespace sonde::symbols::testing
