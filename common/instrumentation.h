// The kinds of instrumentation sonde has (Node.js event loop, Go TLS, CPU sampling), declared
// once: the registry in instrumentation.cpp. A policy's spec.instrumentations, the standalone
// config's instrumentations and the agent's selections, outcomes and policy states are keyed by
// Instrumentation, and each kind parses and validates its own parameters there, so nothing else
// lists the kinds by name. Adding one: a value below, its entry in the registry, its feature
// folder in agent/ (registered in agent/assembly/), its CRD fragment.
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

#include "common/result.h"

namespace sonde {

enum class Instrumentation : uint8_t { kNodejsEventLoop, kGoTls, kCpu };
inline constexpr size_t kInstrumentationCount = 3;

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

// Every kind, in the order features start (the CPU sampler reads the Node.js probes' map).
std::span<const InstrumentationKind> instrumentation_kinds();
const InstrumentationKind& kind_of(Instrumentation id);

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

// Where the CPU kind pushes profiles (the config's instrumentations.cpu.pyroscope; in-cluster,
// the agent's flags).
struct PyroscopeConfig {
  std::string url;  // empty: no push
  uint32_t interval_seconds = 15;
  std::string application = "sonde";
};
// What a Pyroscope push needs (an http URL, a name prefix); the message names what is wrong,
// for the config file's key path or a command-line flag alike.
Status check_pyroscope(const PyroscopeConfig& push);

// The CPU kind's parameters, read back by the CPU feature and the standalone agent.
struct CpuParams {
  uint32_t frequency_hz = 19;
  PyroscopeConfig pyroscope;  // config only
};
CpuParams cpu_params(const InstrumentationParams& params);

// The Node.js kind's parameters, read back by its feature.
struct NodejsParams {
  static constexpr int64_t kMinStallThresholdMs = 10;
  static constexpr int64_t kMaxStallThresholdMs = 60000;
  // Report each loop turn at least this long with its stacks (/debug/nodejs/stalls); 0: off.
  uint32_t stall_threshold_ms = 0;
};
NodejsParams nodejs_params(const InstrumentationParams& params);

}  // namespace sonde
