// libFuzzer target for the HPACK decoder. The input is a sequence of header blocks decoded on one
// Decoder (so the dynamic table carries over), each prefixed by its length in two octets
// (big-endian; the last block takes what is left); the whole input is also Huffman-decoded on
// its own. A peer chooses every octet of these blocks. Any crash, sanitizer report, hang, large
// allocation or broken bound is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "agent/gotls/hpack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sonde::agent::hpack::Decoder;
  const std::span<const uint8_t> input(data, size);
  std::string text;
  (void)sonde::agent::hpack::huffman_decode(input, text, 1024);
  if (text.size() > 1024) __builtin_trap();

  sonde::agent::hpack::Limits limits;
  limits.max_table_size = 8192;
  limits.max_field_bytes = 2048;
  Decoder decoder(limits);
  size_t pos = 0;
  while (pos < size) {
    size_t length = size - pos;
    if (length >= 2) {
      length = std::min<size_t>(size - pos - 2, (size_t{data[pos]} << 8) | data[pos + 1]);
      pos += 2;
    }
    const auto status = decoder.decode(input.subspan(pos, length),
                                       [&](std::string_view name, std::string_view value) {
                                         if (name.size() + value.size() > limits.max_field_bytes) {
                                           __builtin_trap();
                                         }
                                       });
    pos += length;
    if (decoder.table_size() > decoder.max_table_size() ||
        decoder.max_table_size() > limits.max_table_size) {
      __builtin_trap();
    }
    // The table's entries cost what their sizes say, plus a fixed overhead each and the two
    // scratch strings (each at most one field).
    if (decoder.memory() > limits.max_table_size + decoder.table_entries() * 64 +
                               2 * 2 * limits.max_field_bytes + 64) {
      __builtin_trap();
    }
    if (!status.ok()) break;  // the table is not to be trusted past an error
  }
  return 0;
}
