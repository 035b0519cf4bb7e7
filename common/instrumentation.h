// The kinds of instrumentation sonde has, declared once each by its fragment
// (agent/<folder>/<key>.crd.yaml), from which CMake generates the enum Instrumentation and the
// registry this file serves (scripts/gen-crds.py --cpp). A policy's spec.instrumentations, the
// standalone config's instrumentations and the agent's selections, outcomes and policy states are
// keyed by Instrumentation, and each kind parses and validates its own parameters in its folder
// (a *_params.cpp there), so nothing here names a kind.
//
// A kind's parameters are JSON only at the edges: the kind's parser (in its folder) turns a
// policy's or the config's JSON into the kind's own struct, and from there on selections, merges,
// comparisons and the kind's feature handle that struct (InstrumentationParams::as<T>()); the
// policy form is written back as JSON only for a spec's serialization (to_json()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json_fwd.hpp>
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

// The parameters a policy or the config asks of one kind, or nothing (default-constructed: the
// kind is not requested). They hold the kind's own struct T, which its parser made (defaults
// filled in, every value validated): a regular value type (operator==) with
// `void write_json(nlohmann::json& out) const`, the policy form. A kind without parameters holds
// NoParams. Immutable and shared: copying is cheap (one parse serves every selection a policy
// makes); compared by value, so two parses of one spec are equal.
class InstrumentationParams {
 public:
  InstrumentationParams() = default;
  template <class T>
  static InstrumentationParams make(T params) {
    return InstrumentationParams(std::make_shared<const Held<T>>(std::move(params)));
  }
  // The parameters of a kind without any (one object shared by all).
  static InstrumentationParams no_params();

  bool has_value() const { return held_ != nullptr; }
  explicit operator bool() const { return has_value(); }

  // The kind's own struct. T must be the type the kind's parser makes: anything else (another
  // kind's type, or a kind not requested) is a programming error and aborts.
  template <class T>
  const T& as() const {
    const auto* typed = dynamic_cast<const Held<T>*>(held_.get());
    if (typed == nullptr) std::abort();
    return typed->value;
  }

  // The policy form, spec.instrumentations.<key>'s object, into `out`; requested only.
  void write_json(nlohmann::json& out) const;

  bool operator==(const InstrumentationParams& other) const;

 private:
  struct Base {
    virtual ~Base() = default;
    virtual bool equals(const Base& other) const = 0;
    virtual void write_json(nlohmann::json& out) const = 0;
  };
  template <class T>
  struct Held final : Base {
    explicit Held(T v) : value(std::move(v)) {}
    bool equals(const Base& other) const override {
      const auto* same = dynamic_cast<const Held*>(&other);
      return same != nullptr && same->value == value;
    }
    void write_json(nlohmann::json& out) const override { value.write_json(out); }
    T value;
  };
  explicit InstrumentationParams(std::shared_ptr<const Base> held) : held_(std::move(held)) {}

  std::shared_ptr<const Base> held_;
};

// What a kind without parameters holds: its policy form is {}.
struct NoParams {
  void write_json(nlohmann::json& out) const;
  bool operator==(const NoParams&) const = default;
};

// What a policy or the config asks for: the parameters of each requested kind, empty for the
// others.
using Instrumentations = PerInstrumentation<InstrumentationParams>;

// Where parameters come from: a policy's object, or the standalone config, which also takes
// `true`/`false` and keys only an agent on its own needs (a Pyroscope push).
enum class ParamsSource { kPolicy, kConfig };

// Who asks for kinds, with the limits its spec sets: a policy (its spec.limits) or the standalone
// config (its limits). A kind whose fragment lists some of them (`limits:`) takes them into its
// parameters (with_limits()): its own object under instrumentations does not hold them.
struct Asker {
  std::string name;  // a policy as sonde_policy_selection names it ("shop/web"); "config"
  std::optional<int64_t> generation;            // the policy's metadata.generation
  std::optional<int64_t> max_uprobes_per_node;  // spec.limits.maxUprobesPerNode (policies)
  std::optional<double> max_overhead_percent;   // limits.maxOverheadPercent
};

// The limits a kind may take, as bits (InstrumentationKind::limits).
struct LimitKey {
  static constexpr uint8_t kMaxUprobesPerNode = 1U << 0U;
  static constexpr uint8_t kMaxOverheadPercent = 1U << 1U;
};

struct InstrumentationKind {
  Instrumentation id;
  std::string_view key;   // in policies and the config: "nodejsEventLoop"
  std::string_view name;  // in logs and for features: "nodejs"
  bool config_default;    // requested by a config that does not name it
  // `value` parsed into the kind's struct, or empty parameters when it asks for nothing (the
  // config's `false`). `path` names the key in errors ("spec.instrumentations.cpu").
  Result<InstrumentationParams> (*parse)(const nlohmann::json& value, ParamsSource source,
                                         const std::string& path);
  // What a process gets when two policies ask for the kind with `a` and `b`.
  InstrumentationParams (*merge)(const InstrumentationParams& a, const InstrumentationParams& b);
  uint8_t limits;  // the LimitKey bits of the limits it takes, 0 for none
  // `asked` (requested) with the limits of `asker` it takes; nullptr when it takes none.
  InstrumentationParams (*limit)(const InstrumentationParams& asked, const Asker& asker);
};

// Every kind, in its fragment's `order`.
std::span<const InstrumentationKind> instrumentation_kinds();
const InstrumentationKind& kind_of(Instrumentation id);

// For a kind without parameters: a policy's object or the config's true/false (NoParams); the
// first of two.
Result<InstrumentationParams> parse_switch(const nlohmann::json& value, ParamsSource source,
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
// What a config that names no kind asks for: the kinds whose config_default is set, with their
// default_params().
Instrumentations config_defaults();
// The parameters of `kind` asked for with none given (a policy's {}): the schema's defaults.
InstrumentationParams default_params(Instrumentation kind);
// Whether any kind is requested.
bool any_requested(const Instrumentations& requested);
// What `asker` asks for: `requested` with each kind's parameters given the asker's limits the
// kind takes.
Instrumentations with_limits(Instrumentations requested, const Asker& asker);
// The keys of the kinds that take the limit `key` (LimitKey), for messages: "goTLS".
std::string kinds_taking(uint8_t key);

// An overhead budget, limits.maxOverheadPercent of a policy or of the config: the estimated CPU
// the probes of the kinds that take it add to a container, in percent of the container's own CPU
// time, above which the agent detaches the container's probes. `value` must be a number in
// kMinOverheadPercent..100; `path` (the key's) prefixes the error.
inline constexpr double kMinOverheadPercent = 0.01;
Result<double> parse_max_overhead_percent(const nlohmann::json& value, const std::string& path);

}  // namespace sonde
