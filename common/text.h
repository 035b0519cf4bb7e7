// Text that comes from outside the agent -- process names, executable paths, build info, API
// objects -- made safe for sinks that require UTF-8: Prometheus label values (a scrape with an
// invalid one is rejected whole), JSON (nlohmann's dump() throws on one) and log lines.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

namespace sonde {

// `text` with every ill-formed UTF-8 sequence (a stray continuation byte, a bad lead byte, a
// truncated or overlong sequence, a surrogate, a code point past U+10FFFF) replaced by U+FFFD,
// then cut to at most `max_bytes` at a character boundary. Valid text is returned unchanged
// (up to the cut). Linear time, one allocation.
std::string valid_utf8(std::string_view text,
                       size_t max_bytes = std::numeric_limits<size_t>::max());

bool is_valid_utf8(std::string_view text);

}  // namespace sonde
