// The Go toolchain version a binary was built with, from its .go.buildinfo section, and
// whether sonde can read its register-ABI arguments.
//
// Layout: a 16-byte header "\xff Go buildinf:" + pointer size + flags. With flag 2 (Go 1.18
// and later) the version follows at offset 32 as a varint-length string; before that, at
// offset 16 come pointers to Go string headers, resolved through the PT_LOAD segments.
// Every offset and length is bounds-checked: a malformed section is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agent/symbolize/go_pclntab.h"
#include "agent/symbols/elf_file.h"
#include "common/result.h"

namespace sonde::symbolize {

struct GoVersion {
  int major = 0, minor = 0, patch = 0;
  std::string text;  // as recorded, e.g. "go1.19.8"
};

// "go1.19.8" → {1, 19, 8}; "go1.21rc2" → {1, 21, 0}; nullopt when not "go<major>.<minor>".
std::optional<GoVersion> parse_go_version(std::string_view text);

// The version in elf's .go.buildinfo; an Error when there is none (not a Go binary) or it is
// malformed.
Result<GoVersion> go_build_version(const symbols::ElfFile& elf);

// The oldest Go release whose .gopclntab has `layout`, for a binary without .go.buildinfo
// (release pipelines strip it; the function table stays, as the runtime needs it): 1.2, 1.16,
// 1.18, 1.20 or 1.26 (the 1.20 layout with 0 as the header's textStart), `text` saying so
// ("go1.26+ (from .gopclntab; no .go.buildinfo)"). The 1.16 layout is also 1.17's, which passes
// arguments in registers on amd64: the result (1.16) errs on the side of not instrumenting.
GoVersion go_version_from_pclntab(GoPclntabLayout layout, uint64_t header_text_start);

// Go's register ABI for function arguments: amd64 from Go 1.17, arm64 from Go 1.18.
bool go_register_abi(symbols::Machine machine, const GoVersion& v);

}  // namespace sonde::symbolize
