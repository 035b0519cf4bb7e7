#include "agent/symbolize/symbolize_command.h"

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "agent/symbolize/binary_symbolizer.h"
#include "agent/symbolize/kernel_symbols.h"
#include "common/cli.h"

namespace sonde::agent {
namespace {

using symbolize::SymbolizedFrame;

constexpr const char* kDescription =
    "Turns addresses into function names the way the CPU profiler does. For a binary, ADDRESS "
    "is a link-time virtual address (subtract a PIE's load bias first): Go code is resolved "
    "through its pclntab with file, line and inlined frames (stripped binaries included), other "
    "code through the ELF symbol table. With --kernel, addresses are kernel addresses resolved "
    "through /proc/kallsyms (root sees real addresses). Addresses are hex with 0x, or decimal. "
    "Exit status: 0 when every address was resolved, 1 when one was not or the input cannot be "
    "read, 2 on usage errors.";

std::string hex(uint64_t v) {
  char buf[24];
  (void)std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::optional<uint64_t> parse_address(const std::string& s) {
  if (s.empty() || s[0] == '-') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return static_cast<uint64_t>(v);
}

std::string position(std::string_view file, int32_t line) {
  if (file.empty()) return "??:0";
  return std::string(file) + ":" + std::to_string(line);
}

nlohmann::json json_or_null(std::string_view s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(s));
}

}  // namespace

SymbolizeOutput run_symbolize(const std::vector<std::string>& args) {
  SymbolizeOutput result;
  bool json = false;
  bool kernel = false;
  bool return_addresses = false;
  std::vector<std::string> words;
  CLI::App app{kDescription, "sonde-agent symbolize"};
  app.add_flag("--json", json,
               R"(print [{"address", "function", "offset", "file", "line", "inlined": )"
               R"([{"function", "file", "line"}, ...]}, ...], inlined frames innermost first )"
               R"((kernel entries add "module"))");
  app.add_flag("--kernel", kernel, "resolve kernel addresses through /proc/kallsyms");
  app.add_flag("--return-addresses", return_addresses,
               "the addresses are return addresses from a stack (every frame but the innermost): "
               "look up ADDRESS - 1, the call instruction, not what follows it");
  app.add_option("ARGUMENTS", words, "BINARY (unless --kernel), then one or more ADDRESS");
  cli::ParseOutcome parsed = cli::parse_args(app, args);
  if (parsed.exit_code) {
    result.exit_code = *parsed.exit_code;
    result.out = std::move(parsed.out);
    result.err = std::move(parsed.err);
    return result;
  }
  auto usage_error = [&](const std::string& message) {
    result.err = cli::usage_error(app, message);
    result.exit_code = 2;
    return result;
  };
  std::string binary;
  if (!kernel && !words.empty()) {
    binary = words.front();
    words.erase(words.begin());
  }
  if (words.empty()) return usage_error("no addresses");
  std::vector<uint64_t> addresses;
  for (const std::string& w : words) {
    auto a = parse_address(w);
    if (!a || (return_addresses && *a == 0)) return usage_error("'" + w + "' is not an address");
    addresses.push_back(*a);
  }

  nlohmann::json entries = nlohmann::json::array();
  std::string text;
  bool all_found = true;

  if (kernel) {
    auto symbols = symbolize::KernelSymbols::load("/proc");
    if (!symbols.ok()) {
      result.err = "sonde-agent symbolize: " + symbols.error().message() + "\n";
      result.exit_code = 1;
      return result;
    }
    for (uint64_t a : addresses) {
      auto s = symbols->lookup(return_addresses ? a - 1 : a);
      all_found = all_found && s.has_value();
      nlohmann::json e = {{"address", hex(a)}, {"inlined", nlohmann::json::array()}};
      e["function"] = s ? nlohmann::json(std::string(s->name)) : nlohmann::json(nullptr);
      e["offset"] = s ? nlohmann::json(s->offset) : nlohmann::json(nullptr);
      e["file"] = nullptr;
      e["line"] = nullptr;
      e["module"] = s ? json_or_null(s->module) : nlohmann::json(nullptr);
      entries.push_back(e);
      if (!s) {
        text += "??\n\n";
      } else {
        text += std::string(s->name) + "+" + hex(s->offset);
        if (!s->module.empty()) text += " [" + std::string(s->module) + "]";
        text += "\n\n";
      }
    }
  } else {
    auto symbolizer = symbolize::BinarySymbolizer::open(binary);
    if (!symbolizer.ok()) {
      result.err = "sonde-agent symbolize: " + symbolizer.error().message() + "\n";
      result.exit_code = 1;
      return result;
    }
    for (uint64_t a : addresses) {
      std::array<SymbolizedFrame, 32> frames;
      size_t n = (*symbolizer)->symbolize(return_addresses ? a - 1 : a, frames);
      nlohmann::json e = {{"address", hex(a)}, {"inlined", nlohmann::json::array()}};
      if (n == 0) {
        all_found = false;
        e["function"] = nullptr;
        e["offset"] = nullptr;
        e["file"] = nullptr;
        e["line"] = nullptr;
        text += "??\n??:0\n\n";
        entries.push_back(e);
        continue;
      }
      const SymbolizedFrame& outer = frames[n - 1];
      std::string outer_name = symbolize::demangle(outer.function);
      e["function"] = outer_name;
      e["offset"] = outer.offset;
      e["file"] = json_or_null(outer.file);
      e["line"] = outer.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(outer.line);
      for (size_t i = 0; i + 1 < n; ++i) {
        e["inlined"].push_back({{"function", symbolize::demangle(frames[i].function)},
                                {"file", json_or_null(frames[i].file)},
                                {"line", frames[i].line}});
        text += symbolize::demangle(frames[i].function) + " (inlined)\n" +
                position(frames[i].file, frames[i].line) + "\n";
      }
      text +=
          outer_name + "+" + hex(outer.offset) + "\n" + position(outer.file, outer.line) + "\n\n";
      entries.push_back(e);
    }
  }
  result.out = json ? entries.dump(2) + "\n" : text;
  result.exit_code = all_found ? 0 : 1;
  return result;
}

int symbolize_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  SymbolizeOutput r = run_symbolize(args);
  (void)std::fputs(r.out.c_str(), stdout);
  (void)std::fputs(r.err.c_str(), stderr);
  return r.exit_code;
}

}  // namespace sonde::agent
