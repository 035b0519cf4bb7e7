// Reading fields of untrusted JSON objects (API objects, policies, the config as JSON) with
// errors that name the field's path.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "common/result.h"

namespace sonde {

// A field that is present and not null (the API server drops nulls from custom resources);
// nullptr as well when `object` is not an object.
const nlohmann::json* field(const nlohmann::json& object, std::string_view key);

// The integer `key` of `object` within [min, max], `fallback` when absent; errors say
// "<at>.<key>: must be an integer" or "...: must be MIN..MAX, got N".
Result<int64_t> integer_in(const nlohmann::json& object, std::string_view key, int64_t fallback,
                           int64_t min, int64_t max, const std::string& at);

}  // namespace sonde
