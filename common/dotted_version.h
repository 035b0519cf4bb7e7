// Versions written as "major.minor[.patch]" followed by anything: a kernel release
// ("6.18.44-fc-v595"), a Go toolchain after its "go" ("1.21rc2"). One parser for both, so they
// agree on what a malformed version is.
#pragma once

#include <optional>
#include <string_view>

namespace sonde {

struct DottedVersion {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const DottedVersion&) const = default;
};

// {major, minor, patch} from the start of `text`; patch is 0 when no number follows the second
// dot (or there is no second dot); whatever follows is ignored. nullopt unless `text` starts
// with <number>.<number>.
std::optional<DottedVersion> parse_dotted_version(std::string_view text);

}  // namespace sonde
