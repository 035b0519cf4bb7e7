// The kinds of instrumentation sonde has, declared once each by its fragment
// (agent/<folder>/<key>.crd.yaml), from which CMake generates the enum Instrumentation and the
// registry this file serves (scripts/gen-crds.py --cpp). A policy's spec.instrumentations, the
// standalone config's instrumentations and the agent's selections, outcomes and policy states are
// keyed by Instrumentation, and each kind parses and validates its own parameters in its folder
// (a *_params.cpp there), so nothing here names a kind.
//
// Parameters travel as JSON objects the kind's parser produced (defaults filled in, every key
// validated), read back by the kind's own feature.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/instrumentation_kinds.h"  // generated: the enum, the parameters' bounds
#include "common/result.h"

namespace sonde {

// One T per instrumentation, indexed by it.
template <class T>
struct PerInstrumentation {
  std::array<T, kInstrumentationCount> values{};
  T& operator[](Instrumentation i) { return values[static_cast<size_t>(i)]; }
  const T& operator[](Instrumentation i) const { return values[static_cast<size_t>(i)]; }
  bool operator==(const PerInstrumentation&) const = default;
};

// A requested instrumentation's parameters ({} when it has none).
using InstrumentationParams = nlohmann::json;
// What a policy or the config asks for: the parameters of each requested kind, nullopt for the
// others.
using Instrumentations = PerInstrumentation<std::optional<InstrumentationParams>>;

// Where parameters come from: a policy's object, or the standalone config, which also takes
// `true`/`false` and keys only an agent on its own needs (a Pyroscope push).
enum class ParamsSource { kPolicy, kConfig };

struct InstrumentationKind {
  Instrumentation id;
  std::string_view key;   // in policies and the config: "nodejsEventLoop"
  std::string_view name;  // in logs and for features: "nodejs"
  bool config_default;    // requested by a config that does not name it
  // `value` parsed into parameters, or nullopt when it asks for nothing (the config's `false`).
  // `path` names the key in errors ("spec.instrumentations.cpu").
  Result<std::optional<InstrumentationParams>> (*parse)(const nlohmann::json& value,
                                                        ParamsSource source,
                                                        const std::string& path);
  // What a process gets when two policies ask for the kind with `a` and `b`.
  InstrumentationParams (*merge)(const InstrumentationParams& a, const InstrumentationParams& b);
};

// Every kind, in its fragment's `order`.
std::span<const InstrumentationKind> instrumentation_kinds();
const InstrumentationKind& kind_of(Instrumentation id);

// For a kind without parameters: a policy's object or the config's true/false; the first of two.
Result<std::optional<InstrumentationParams>> parse_switch(const nlohmann::json& value,
                                                          ParamsSource source,
                                                          const std::string& path);
InstrumentationParams merge_first(const InstrumentationParams& a, const InstrumentationParams& b);

// For kinds' parsers: an error unless every key of `object` is in `known`; `field`'s value in
// `object` (the schema's default when absent, nullopt when it has none; an error when it is not
// an integer within its bounds).
Status check_keys(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                  const std::string& path);
Result<std::optional<int64_t>> integer_field(const nlohmann::json& object,
                                             const IntegerField& field, const std::string& path);

// `object`'s keys parsed by their kinds; an unknown key is an error in the config (a policy's
// unknown fields are pruned by the API server). `path` prefixes every error.
Result<Instrumentations> parse_instrumentations(const nlohmann::json& object, ParamsSource source,
                                                const std::string& path);
// The policy form: {key: params} for every requested kind.
nlohmann::json to_json(const Instrumentations& requested);
// What a config that names no kind asks for: the kinds whose config_default is set.
Instrumentations config_defaults();
// Whether any kind is requested.
bool any_requested(const Instrumentations& requested);

// Go TLS's overhead budget, limits.maxOverheadPercent of a policy or of the config: the estimated
// CPU its probes add to a container, in percent of the container's own CPU time, above which the
// agent detaches the container's probes. `value` must be a number in kMinOverheadPercent..100;
// `path` (the key's) prefixes the error.
inline constexpr double kMinOverheadPercent = 0.01;
Result<double> parse_max_overhead_percent(const nlohmann::json& value, const std::string& path);

}  // namespace sonde
