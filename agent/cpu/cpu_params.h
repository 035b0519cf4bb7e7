// The CPU kind's parameters (spec.instrumentations.cpu, the config's instrumentations.cpu): parsed
// and merged here for the registry (its bounds come from cpu.crd.yaml), read back by the CPU
// feature and the standalone agent (InstrumentationParams::as<CpuParams>()). Compiled into
// sonde_common, which the operator links too, so this folder's parameters need nothing else of the
// agent.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "common/instrumentation.h"
#include "common/result.h"

namespace sonde {

// Where the CPU kind pushes profiles (the config's instrumentations.cpu.pyroscope; in-cluster,
// the agent's flags).
struct PyroscopeConfig {
  std::string url;  // empty: no push
  uint32_t interval_seconds = 15;
  std::string application = "sonde";
  bool operator==(const PyroscopeConfig&) const = default;
};
// What a Pyroscope push needs (an http URL, a name prefix); the message names what is wrong,
// for the config file's key path or a command-line flag alike.
Status check_pyroscope(const PyroscopeConfig& push);

struct CpuParams {
  uint32_t frequency_hz = static_cast<uint32_t>(*fields::cpu::kFrequencyHz.fallback);
  PyroscopeConfig pyroscope;  // config only

  // The policy form, {frequencyHz} (a policy has no Pyroscope push).
  void write_json(nlohmann::json& out) const;
  bool operator==(const CpuParams&) const = default;
};

namespace kinds {
// A policy's object ({frequencyHz}); the config's mapping, which also says whether the kind is on
// (`enabled`, default off) and where to push profiles (`pyroscope`).
Result<InstrumentationParams> parse_cpu(const nlohmann::json& value, ParamsSource source,
                                        const std::string& path);
// Two policies sampling one container: the higher frequency.
InstrumentationParams merge_cpu(const InstrumentationParams& a, const InstrumentationParams& b);
}  // namespace kinds

}  // namespace sonde
