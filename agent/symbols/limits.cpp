#include "agent/symbols/limits.h"

namespace sonde::symbols {

Error too_large_error(std::string_view what, uint64_t value, uint64_t cap) {
  return Error("too large to instrument: " + std::string(what) + " (" + std::to_string(value) +
                   ") exceeds " + std::to_string(cap),
               kTooLargeCode);
}

}  // namespace sonde::symbols
