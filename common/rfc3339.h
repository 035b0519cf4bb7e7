// RFC 3339 timestamps in UTC, as the Kubernetes API writes and reads them: metav1.Time (whole
// seconds), metav1.MicroTime (microseconds), and milliseconds for the agent's own JSON.
#pragma once

#include <optional>
#include <string>

#include "common/clock.h"

namespace sonde {

// "2026-01-02T03:04:05Z", or with `fraction_digits` (3: milliseconds, 6: microseconds; any
// other value is taken as 0) "2026-01-02T03:04:05.123456Z". Truncates, never rounds up.
std::string format_rfc3339(WallTime t, int fraction_digits = 0);

// Parses RFC 3339 ("2026-01-02T03:04:05Z", fractional seconds and +hh:mm/-hh:mm offsets
// allowed; the fraction is ignored); nullopt for anything else.
std::optional<WallTime> parse_rfc3339(const std::string& text);

}  // namespace sonde
