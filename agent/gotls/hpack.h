// hpack::Decoder: the HPACK (RFC 7541) decoder of one direction of one HTTP/2 connection,
// rebuilding the sending encoder's dynamic table from the header blocks it sent, in order.
//
// Semantics:
//   - decode() takes one complete header block (HEADERS/PUSH_PROMISE + CONTINUATIONs, padding
//     and priority removed) and calls `field` for every header field in order. Every block must
//     be decoded in full, even when only a few fields matter, or the table desyncs.
//   - Static table (61 entries), dynamic table with eviction by size (an entry costs name +
//     value + 32 octets), indexed fields, literals with incremental indexing / without indexing /
//     never indexed, dynamic table size updates (only before the first field of a block),
//     Huffman strings (RFC 7541 Appendix B; more than 7 bits of padding, padding that is not a
//     prefix of EOS, or a decoded EOS are errors).
//   - Any error (malformed bytes, a bound below exceeded) leaves the table in an unspecified
//     state: the caller must stop decoding this direction (the HTTP/2 connection is broken).
//   - Values: with Limits::kept_values set, the table keeps only those names' values; the
//     scratch strings that hold each literal while it is decoded are zeroed when decode()
//     returns and whenever their memory is released (wiped.h), so a value of any other header
//     (credentials, cookies) is in the decoder's memory only during its own block's decode().
//
// Bounds (each is an error past it, never an allocation):
//   - integers: at most kMaxIntegerBytes continuation octets and values below 2^32;
//   - a dynamic table size update above Limits::max_table_size;
//   - a string literal (after Huffman decoding) or a field's name + value above
//     Limits::max_field_bytes;
//   - memory: the dynamic table holds at most max_table_size octets of entry sizes (name + value
//     + 32 each), so memory() <= max_table_size plus the container's per-entry overhead, plus two
//     scratch strings of at most max_field_bytes during decode() (at most 1 KiB each between
//     blocks). A block of indexed fields is never materialised: `field` sees views into the
//     table or into the scratch strings, so a small block referencing a large entry many times
//     costs time linear in the block, not memory.
//
// Thread-safety: none; one Decoder belongs to one connection direction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gotls/wiped.h"
#include "common/result.h"

namespace sonde::agent::hpack {

struct Limits {
  // The largest dynamic table a size update may ask for. RFC 7541's default (and what the
  // receiver allows until its SETTINGS_HEADER_TABLE_SIZE says otherwise) is 4096; we do not see
  // SETTINGS payloads, so we accept up to this, which covers peers that advertise larger tables.
  size_t max_table_size = 65536;
  // The largest decoded string literal, and the largest name + value of one field.
  size_t max_field_bytes = 16384;
  // Names whose values the dynamic table keeps; empty: every value (a plain RFC 7541 decoder).
  // An entry of another name keeps its name and its value's size, which is all indexing and
  // eviction need, and gives `field` an empty value when indexed.
  std::vector<std::string_view> kept_values;
};

// Called for each decoded field; the views are valid only during the call.
using FieldFn = std::function<void(std::string_view name, std::string_view value)>;

class Decoder {
 public:
  static constexpr size_t kDefaultTableSize = 4096;  // RFC 7541 / RFC 9113 initial value
  static constexpr size_t kEntryOverhead = 32;       // RFC 7541 4.1
  static constexpr int kMaxIntegerBytes = 5;         // continuation octets after the prefix

  explicit Decoder(const Limits& limits = {});

  // Decodes one complete header block; see the file comment. On error the message says what
  // was wrong ("integer overflow", "index 70 past the table", ...).
  Status decode(std::span<const uint8_t> block, const FieldFn& field);

  // The dynamic table (for tests): entry 0 is the newest (HPACK index 62).
  size_t table_entries() const { return table_.size(); }
  std::pair<std::string_view, std::string_view> table_entry(size_t i) const;
  size_t table_size() const { return size_; }          // sum of entry sizes (name+value+32)
  size_t max_table_size() const { return max_size_; }  // as set by the last size update
  size_t memory() const;                               // bytes held, approximately

 private:
  struct Entry {
    std::string name;
    std::string value;  // empty unless the name's value is kept
    size_t value_size = 0;
  };
  static constexpr size_t kKeptScratchBytes = 1024;
  void release_large_scratch();
  void evict_to(size_t size);
  void insert(std::string_view name, std::string_view value);

  Limits limits_;
  std::deque<Entry> table_;  // front: newest
  size_t size_ = 0;
  size_t max_size_ = kDefaultTableSize;
  Status decode_fields(std::span<const uint8_t> block, const FieldFn& field);
  bool keeps_value(std::string_view name) const;

  WipedString scratch_name_;
  WipedString scratch_value_;
  size_t name_high_ = 0;  // the scratch strings' largest sizes in this decode() (wiped.h)
  size_t value_high_ = 0;
};

// Decodes a Huffman-coded string (RFC 7541 5.2, Appendix B) onto `out` (std::string or
// WipedString), which must not grow past `max_bytes`. Exposed for tests and the fuzzer.
template <typename String>
Status huffman_decode(std::span<const uint8_t> in, String& out, size_t max_bytes);
extern template Status huffman_decode(std::span<const uint8_t>, std::string&, size_t);
extern template Status huffman_decode(std::span<const uint8_t>, WipedString&, size_t);

}  // namespace sonde::agent::hpack
