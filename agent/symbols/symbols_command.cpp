// `sonde-agent symbols [--json] BINARY NAME...`: what the agent would attach to, for users
// checking a binary and for debugging probes that do not fire.
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/commands.h"
#include "agent/symbols/binary_identity.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/symbol_resolver.h"
#include "common/cli.h"

namespace sonde::agent {
namespace {

using symbols::ProbeTarget;

std::string hex(uint64_t v) {
  char buf[24];
  (void)std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

std::string offsets_text(const std::vector<uint32_t>& offsets) {
  std::string out;
  for (uint32_t o : offsets) {
    if (!out.empty()) out += ' ';
    out += '+';
    out += hex(o);
  }
  return out;
}

std::string returns_text(const ProbeTarget& t) {
  if (t.has_return_sites()) {
    std::string out = offsets_text(t.return_offsets);
    if (!t.exit_jump_offsets.empty())
      out += " (also exits by jump at " + offsets_text(t.exit_jump_offsets) + ")";
    return out;
  }
  std::string out = std::string("none (") + symbols::return_site_status_name(t.return_status);
  if (!t.exit_jump_offsets.empty())
    out += ", exits by jump at " + offsets_text(t.exit_jump_offsets);
  return out + ")";
}

void print_table(const std::string& path, const symbols::BinaryIdentity& id,
                 const std::string& build_id, symbols::Machine machine,
                 const std::vector<ProbeTarget>& targets) {
  (void)std::printf("binary    %s\n", path.c_str());
  (void)std::printf("identity  %s\n", id.to_string().c_str());
  if (!build_id.empty()) std::printf("build-id  %s\n", build_id.c_str());
  (void)std::printf("machine   %s\n\n", symbols::machine_name(machine));
  size_t width = 4;
  for (const auto& t : targets) width = std::max(width, t.name.size());
  const int w = static_cast<int>(width);
  (void)std::printf("%-*s  %-12s  %-12s  %-7s  %s\n", w, "NAME", "ADDRESS", "FILE_OFFSET", "SIZE",
                    "RETURNS");
  for (const auto& t : targets) {
    if (!t.found) {
      (void)std::printf("%-*s  not found\n", w, t.name.c_str());
      continue;
    }
    (void)std::printf("%-*s  %-12s  %-12s  %-7" PRIu64 "  %s%s\n", w, t.name.c_str(),
                      hex(t.address).c_str(), hex(t.file_offset).c_str(), t.size,
                      returns_text(t).c_str(),
                      t.ambiguous ? "  [ambiguous: several definitions]" : "");
  }
}

nlohmann::json to_json(const std::string& path, const symbols::BinaryIdentity& id,
                       const std::string& build_id, symbols::Machine machine,
                       const std::vector<ProbeTarget>& targets) {
  nlohmann::json binary = {
      {"path", path},
      {"inode", id.inode},
      {"size", id.size},
      {"mtime_ns", id.mtime_ns},
      {"digest_kind", id.digest_kind_name()},
      {"digest", id.digest_hex()},
      {"build_id", build_id},
      {"machine", symbols::machine_name(machine)},
  };
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : targets) {
    list.push_back({{"name", t.name},
                    {"found", t.found},
                    {"address", t.address},
                    {"file_offset", t.file_offset},
                    {"size", t.size},
                    {"return_offsets", t.return_offsets}});
  }
  return {{"binary", binary}, {"symbols", list}};
}

}  // namespace

int symbols_main(int argc, char** argv) {
  bool json = false;
  std::string path;
  std::vector<std::string> names;
  CLI::App app{
      "Resolves function names in an ELF64 binary the way the agent does before attaching "
      "uprobes: virtual address, file offset (the uprobe attach offset), size, and the return "
      "instructions found by decoding the function (offsets from its start). Functions that "
      "leave only through tail calls are reported as having no return site. Exit status: 0 "
      "when every name was found, 1 when a name is missing or the binary cannot be read, 2 on "
      "usage errors.",
      "sonde-agent symbols"};
  app.add_flag("--json", json, R"(print one JSON object: {"binary": {...}, "symbols": [...]})");
  app.add_option("BINARY", path, "the ELF file")->required();
  app.add_option("NAME", names, "function names to resolve")->required();
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;

  auto binary = symbols::OpenBinary::open(path);
  if (!binary.ok()) {
    (void)std::fprintf(stderr, "sonde-agent symbols: %s\n", binary.error().message().c_str());
    return 1;
  }
  auto mapping = binary->map();
  if (!mapping.ok()) {
    (void)std::fprintf(stderr, "sonde-agent symbols: %s\n", mapping.error().message().c_str());
    return 1;
  }
  auto elf = symbols::ElfFile::parse(mapping->bytes());
  if (!elf.ok()) {
    (void)std::fprintf(stderr, "sonde-agent symbols: %s: %s\n", path.c_str(),
                       elf.error().message().c_str());
    return 1;
  }
  auto targets = symbols::resolve(*elf, names);
  if (!targets.ok()) {
    (void)std::fprintf(stderr, "sonde-agent symbols: %s: %s\n", path.c_str(),
                       targets.error().message().c_str());
    return 1;
  }
  const auto build_id = elf->build_id();
  const std::string build_id_text = build_id ? build_id->to_string() : "";

  if (json) {
    (void)std::printf(
        "%s\n",
        to_json(path, binary->identity(), build_id_text, elf->machine(), *targets).dump(2).c_str());
  } else {
    print_table(path, binary->identity(), build_id_text, elf->machine(), *targets);
  }
  bool all_found = true;
  for (const auto& t : *targets) all_found = all_found && t.found;
  return all_found ? 0 : 1;
}

}  // namespace sonde::agent
