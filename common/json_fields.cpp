#include "common/json_fields.h"

#include <nlohmann/json.hpp>

namespace sonde {

const nlohmann::json* field(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

Result<int64_t> integer_in(const nlohmann::json& object, std::string_view key, int64_t fallback,
                           int64_t min, int64_t max, const std::string& at) {
  const nlohmann::json* v = field(object, key);
  if (v == nullptr) return fallback;
  const std::string where = at + "." + std::string(key);
  if (!v->is_number_integer()) return Error(where + ": must be an integer");
  auto out_of_range = [&](const std::string& got) {
    return Error(where + ": must be " + std::to_string(min) + ".." + std::to_string(max) +
                 ", got " + got);
  };
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return out_of_range(std::to_string(v->get<uint64_t>()));
  }
  const auto n = v->get<int64_t>();
  if (n < min || n > max) return out_of_range(std::to_string(n));
  return n;
}

}  // namespace sonde
