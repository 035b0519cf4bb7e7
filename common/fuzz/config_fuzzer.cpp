// libFuzzer target for the agent's YAML configuration (standalone mode, the chart's
// ConfigMap): malformed YAML and wrong shapes must give an Error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)sonde::parse_agent_config(text, "<fuzz>");
  return 0;
}
