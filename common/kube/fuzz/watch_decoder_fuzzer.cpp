// libFuzzer target for the watch stream decoder: arbitrary bytes, fed in arbitrary chunkings,
// must give events or an error, never a crash or unbounded buffering. The first input byte
// picks the chunk size so split points vary.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/kube/watch_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  sonde::kube::WatchDecoder decoder;
  while (!rest.empty()) {
    const size_t n = std::min(chunk, rest.size());
    if (!decoder.feed(rest.substr(0, n), [](sonde::kube::WatchEvent) { return true; }).ok()) {
      break;
    }
    rest.remove_prefix(n);
  }
  return 0;
}
