#include "agent/gotls/hpack.h"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sonde::agent::hpack {
namespace {

struct StaticEntry {
  std::string_view name;
  std::string_view value;
};

// RFC 7541 Appendix A; HPACK index i is kStaticTable[i - 1].
constexpr std::array<StaticEntry, 61> kStaticTable = {{
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
}};

struct Code {
  uint32_t bits;  // the code, right-aligned
  uint8_t length;
};

// RFC 7541 Appendix B, by symbol (256 is EOS).
constexpr std::array<Code, 257> kHuffmanCodes = {{
    {0x1ff8, 13},     {0x7fffd8, 23},   {0xfffffe2, 28},  {0xfffffe3, 28},  {0xfffffe4, 28},
    {0xfffffe5, 28},  {0xfffffe6, 28},  {0xfffffe7, 28},  {0xfffffe8, 28},  {0xffffea, 24},
    {0x3ffffffc, 30}, {0xfffffe9, 28},  {0xfffffea, 28},  {0x3ffffffd, 30}, {0xfffffeb, 28},
    {0xfffffec, 28},  {0xfffffed, 28},  {0xfffffee, 28},  {0xfffffef, 28},  {0xffffff0, 28},
    {0xffffff1, 28},  {0xffffff2, 28},  {0x3ffffffe, 30}, {0xffffff3, 28},  {0xffffff4, 28},
    {0xffffff5, 28},  {0xffffff6, 28},  {0xffffff7, 28},  {0xffffff8, 28},  {0xffffff9, 28},
    {0xffffffa, 28},  {0xffffffb, 28},  {0x14, 6},        {0x3f8, 10},      {0x3f9, 10},
    {0xffa, 12},      {0x1ff9, 13},     {0x15, 6},        {0xf8, 8},        {0x7fa, 11},
    {0x3fa, 10},      {0x3fb, 10},      {0xf9, 8},        {0x7fb, 11},      {0xfa, 8},
    {0x16, 6},        {0x17, 6},        {0x18, 6},        {0x0, 5},         {0x1, 5},
    {0x2, 5},         {0x19, 6},        {0x1a, 6},        {0x1b, 6},        {0x1c, 6},
    {0x1d, 6},        {0x1e, 6},        {0x1f, 6},        {0x5c, 7},        {0xfb, 8},
    {0x7ffc, 15},     {0x20, 6},        {0xffb, 12},      {0x3fc, 10},      {0x1ffa, 13},
    {0x21, 6},        {0x5d, 7},        {0x5e, 7},        {0x5f, 7},        {0x60, 7},
    {0x61, 7},        {0x62, 7},        {0x63, 7},        {0x64, 7},        {0x65, 7},
    {0x66, 7},        {0x67, 7},        {0x68, 7},        {0x69, 7},        {0x6a, 7},
    {0x6b, 7},        {0x6c, 7},        {0x6d, 7},        {0x6e, 7},        {0x6f, 7},
    {0x70, 7},        {0x71, 7},        {0x72, 7},        {0xfc, 8},        {0x73, 7},
    {0xfd, 8},        {0x1ffb, 13},     {0x7fff0, 19},    {0x1ffc, 13},     {0x3ffc, 14},
    {0x22, 6},        {0x7ffd, 15},     {0x3, 5},         {0x23, 6},        {0x4, 5},
    {0x24, 6},        {0x5, 5},         {0x25, 6},        {0x26, 6},        {0x27, 6},
    {0x6, 5},         {0x74, 7},        {0x75, 7},        {0x28, 6},        {0x29, 6},
    {0x2a, 6},        {0x7, 5},         {0x2b, 6},        {0x76, 7},        {0x2c, 6},
    {0x8, 5},         {0x9, 5},         {0x2d, 6},        {0x77, 7},        {0x78, 7},
    {0x79, 7},        {0x7a, 7},        {0x7b, 7},        {0x7ffe, 15},     {0x7fc, 11},
    {0x3ffd, 14},     {0x1ffd, 13},     {0xffffffc, 28},  {0xfffe6, 20},    {0x3fffd2, 22},
    {0xfffe7, 20},    {0xfffe8, 20},    {0x3fffd3, 22},   {0x3fffd4, 22},   {0x3fffd5, 22},
    {0x7fffd9, 23},   {0x3fffd6, 22},   {0x7fffda, 23},   {0x7fffdb, 23},   {0x7fffdc, 23},
    {0x7fffdd, 23},   {0x7fffde, 23},   {0xffffeb, 24},   {0x7fffdf, 23},   {0xffffec, 24},
    {0xffffed, 24},   {0x3fffd7, 22},   {0x7fffe0, 23},   {0xffffee, 24},   {0x7fffe1, 23},
    {0x7fffe2, 23},   {0x7fffe3, 23},   {0x7fffe4, 23},   {0x1fffdc, 21},   {0x3fffd8, 22},
    {0x7fffe5, 23},   {0x3fffd9, 22},   {0x7fffe6, 23},   {0x7fffe7, 23},   {0xffffef, 24},
    {0x3fffda, 22},   {0x1fffdd, 21},   {0xfffe9, 20},    {0x3fffdb, 22},   {0x3fffdc, 22},
    {0x7fffe8, 23},   {0x7fffe9, 23},   {0x1fffde, 21},   {0x7fffea, 23},   {0x3fffdd, 22},
    {0x3fffde, 22},   {0xfffff0, 24},   {0x1fffdf, 21},   {0x3fffdf, 22},   {0x7fffeb, 23},
    {0x7fffec, 23},   {0x1fffe0, 21},   {0x1fffe1, 21},   {0x3fffe0, 22},   {0x1fffe2, 21},
    {0x7fffed, 23},   {0x3fffe1, 22},   {0x7fffee, 23},   {0x7fffef, 23},   {0xfffea, 20},
    {0x3fffe2, 22},   {0x3fffe3, 22},   {0x3fffe4, 22},   {0x7ffff0, 23},   {0x3fffe5, 22},
    {0x3fffe6, 22},   {0x7ffff1, 23},   {0x3ffffe0, 26},  {0x3ffffe1, 26},  {0xfffeb, 20},
    {0x7fff1, 19},    {0x3fffe7, 22},   {0x7ffff2, 23},   {0x3fffe8, 22},   {0x1ffffec, 25},
    {0x3ffffe2, 26},  {0x3ffffe3, 26},  {0x3ffffe4, 26},  {0x7ffffde, 27},  {0x7ffffdf, 27},
    {0x3ffffe5, 26},  {0xfffff1, 24},   {0x1ffffed, 25},  {0x7fff2, 19},    {0x1fffe3, 21},
    {0x3ffffe6, 26},  {0x7ffffe0, 27},  {0x7ffffe1, 27},  {0x3ffffe7, 26},  {0x7ffffe2, 27},
    {0xfffff2, 24},   {0x1fffe4, 21},   {0x1fffe5, 21},   {0x3ffffe8, 26},  {0x3ffffe9, 26},
    {0xffffffd, 28},  {0x7ffffe3, 27},  {0x7ffffe4, 27},  {0x7ffffe5, 27},  {0xfffec, 20},
    {0xfffff3, 24},   {0xfffed, 20},    {0x1fffe6, 21},   {0x3fffe9, 22},   {0x1fffe7, 21},
    {0x1fffe8, 21},   {0x7ffff3, 23},   {0x3fffea, 22},   {0x3fffeb, 22},   {0x1ffffee, 25},
    {0x1ffffef, 25},  {0xfffff4, 24},   {0xfffff5, 24},   {0x3ffffea, 26},  {0x7ffff4, 23},
    {0x3ffffeb, 26},  {0x7ffffe6, 27},  {0x3ffffec, 26},  {0x3ffffed, 26},  {0x7ffffe7, 27},
    {0x7ffffe8, 27},  {0x7ffffe9, 27},  {0x7ffffea, 27},  {0x7ffffeb, 27},  {0xffffffe, 28},
    {0x7ffffec, 27},  {0x7ffffed, 27},  {0x7ffffee, 27},  {0x7ffffef, 27},  {0x7fffff0, 27},
    {0x3ffffee, 26},  {0x3fffffff, 30},
}};
constexpr int kEos = 256;

// The Huffman code as a binary tree, built once: next[bit] >= 0 is an inner node, < 0 is the
// leaf of symbol -next - 1. The code is complete, so every inner node has two children.
class HuffmanTree {
 public:
  HuffmanTree() {
    nodes_.push_back({kUnset, kUnset});
    for (int symbol = 0; symbol < static_cast<int>(kHuffmanCodes.size()); ++symbol) {
      const Code code = kHuffmanCodes[symbol];
      size_t node = 0;
      for (int i = code.length - 1; i > 0; --i) {
        const int bit = static_cast<int>((code.bits >> i) & 1U);
        if (nodes_[node][bit] == kUnset) {
          nodes_[node][bit] = static_cast<int16_t>(nodes_.size());
          nodes_.push_back({kUnset, kUnset});
        }
        node = static_cast<size_t>(nodes_[node][bit]);
      }
      nodes_[node][code.bits & 1U] = static_cast<int16_t>(-symbol - 1);
    }
  }
  static constexpr int16_t kUnset = INT16_MIN;
  const std::array<int16_t, 2>& node(size_t i) const { return nodes_[i]; }

 private:
  std::vector<std::array<int16_t, 2>> nodes_;
};

const HuffmanTree& huffman_tree() {
  static const HuffmanTree tree;
  return tree;
}

// RFC 7541 5.1: an integer with an N-bit prefix starting at block[pos]; pos moves past it.
Result<uint32_t> read_integer(std::span<const uint8_t> block, size_t& pos, int prefix_bits) {
  const uint32_t mask = (1U << prefix_bits) - 1;
  uint64_t value = block[pos++] & mask;
  if (value < mask) return static_cast<uint32_t>(value);
  int shift = 0;
  for (int i = 0;; ++i) {
    if (pos >= block.size()) return Error("truncated integer");
    if (i >= Decoder::kMaxIntegerBytes) return Error("integer longer than 5 continuation octets");
    const uint8_t byte = block[pos++];
    value += static_cast<uint64_t>(byte & 0x7fU) << shift;
    if (value > UINT32_MAX) return Error("integer overflow (2^32 or more)");
    if ((byte & 0x80U) == 0) break;
    shift += 7;
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

template <typename String>
Status huffman_decode(std::span<const uint8_t> in, String& out, size_t max_bytes) {
  const HuffmanTree& tree = huffman_tree();
  size_t node = 0;
  int pending_bits = 0;  // bits read since the last symbol
  bool pending_ones = true;
  for (const uint8_t byte : in) {
    for (int i = 7; i >= 0; --i) {
      const unsigned bit = (byte >> i) & 1U;
      pending_ones = pending_ones && bit == 1;
      ++pending_bits;
      const int16_t next = tree.node(node)[bit];
      if (next == HuffmanTree::kUnset) return Error("Huffman: invalid code");
      if (next >= 0) {
        node = static_cast<size_t>(next);
        continue;
      }
      const int symbol = -next - 1;
      if (symbol == kEos) return Error("Huffman: EOS in a string");
      if (out.size() >= max_bytes) return Error("string longer than the field bound");
      out.push_back(static_cast<char>(symbol));
      node = 0;
      pending_bits = 0;
      pending_ones = true;
    }
  }
  if (pending_bits > 7) return Error("Huffman: padding longer than 7 bits");
  if (!pending_ones) return Error("Huffman: padding is not a prefix of EOS");
  return ok_status();
}
template Status huffman_decode(std::span<const uint8_t>, std::string&, size_t);
template Status huffman_decode(std::span<const uint8_t>, WipedString&, size_t);

namespace {

// RFC 7541 5.2: a string literal at block[pos] onto out (cleared first); pos moves past it.
Status read_string(std::span<const uint8_t> block, size_t& pos, WipedString& out,
                   size_t max_bytes) {
  out.clear();
  if (pos >= block.size()) return Error("truncated string");
  const bool huffman = (block[pos] & 0x80U) != 0;
  ASSIGN_OR_RETURN(const uint32_t length, read_integer(block, pos, 7));
  if (length > block.size() - pos) return Error("string past the end of the block");
  const auto bytes = block.subspan(pos, length);
  pos += length;
  if (huffman) return huffman_decode(bytes, out, max_bytes);
  if (length > max_bytes) return Error("string longer than the field bound");
  out.assign(bytes.begin(), bytes.end());
  return ok_status();
}

}  // namespace

Decoder::Decoder(const Limits& limits) : limits_(limits) {}

std::pair<std::string_view, std::string_view> Decoder::table_entry(size_t i) const {
  return {table_[i].name, table_[i].value};
}

size_t Decoder::memory() const {
  return size_ + table_.size() * sizeof(Entry) + scratch_name_.capacity() +
         scratch_value_.capacity();
}

bool Decoder::keeps_value(std::string_view name) const {
  if (limits_.kept_values.empty()) return true;
  for (std::string_view kept : limits_.kept_values) {
    if (name == kept) return true;
  }
  return false;
}

void Decoder::evict_to(size_t size) {
  while (size_ > size && !table_.empty()) {
    size_ -= table_.back().name.size() + table_.back().value_size + kEntryOverhead;
    table_.pop_back();
  }
}

void Decoder::insert(std::string_view name, std::string_view value) {
  const size_t size = name.size() + value.size() + kEntryOverhead;
  if (size > max_size_) {  // RFC 7541 4.4: not an error, the table ends up empty
    evict_to(0);
    return;
  }
  evict_to(max_size_ - size);
  table_.push_front(
      {std::string(name), keeps_value(name) ? std::string(value) : std::string(), value.size()});
  size_ += size;
}

Status Decoder::decode(std::span<const uint8_t> block, const FieldFn& field) {
  Status st = decode_fields(block, field);
  // Whatever the outcome, the literals of this block leave no trace in the scratch strings (a
  // literal cut short by an error may have reached past the high-water marks: all of them then).
  wipe(scratch_name_, st.ok() ? name_high_ : scratch_name_.capacity());
  wipe(scratch_value_, st.ok() ? value_high_ : scratch_value_.capacity());
  name_high_ = value_high_ = 0;
  release_large_scratch();
  return st;
}

Status Decoder::decode_fields(std::span<const uint8_t> block, const FieldFn& field) {
  size_t pos = 0;
  bool field_seen = false;
  while (pos < block.size()) {
    const uint8_t first = block[pos];
    if ((first & 0x80U) != 0) {  // 6.1 indexed header field
      ASSIGN_OR_RETURN(const uint32_t index, read_integer(block, pos, 7));
      if (index == 0) return Error("indexed field with index 0");
      if (index <= kStaticTable.size()) {
        field(kStaticTable[index - 1].name, kStaticTable[index - 1].value);
      } else if (index - kStaticTable.size() <= table_.size()) {
        const Entry& entry = table_[index - kStaticTable.size() - 1];
        field(entry.name, entry.value);
      } else {
        return Error("index " + std::to_string(index) + " past the table");
      }
      field_seen = true;
      continue;
    }
    if ((first & 0xe0U) == 0x20) {  // 6.3 dynamic table size update
      if (field_seen) return Error("table size update after a field");
      ASSIGN_OR_RETURN(const uint32_t size, read_integer(block, pos, 5));
      if (size > limits_.max_table_size) {
        return Error("table size update to " + std::to_string(size) + " over the bound " +
                     std::to_string(limits_.max_table_size));
      }
      max_size_ = size;
      evict_to(size);
      continue;
    }
    // 6.2: with incremental indexing (01, 6-bit prefix), without (0000) or never (0001, 4-bit).
    const bool indexing = (first & 0xc0U) == 0x40;
    ASSIGN_OR_RETURN(const uint32_t name_index, read_integer(block, pos, indexing ? 6 : 4));
    if (name_index == 0) {
      RETURN_IF_ERROR(read_string(block, pos, scratch_name_, limits_.max_field_bytes));
    } else if (name_index <= kStaticTable.size()) {
      scratch_name_.assign(kStaticTable[name_index - 1].name);
    } else if (name_index - kStaticTable.size() <= table_.size()) {
      // Copied: inserting this field may evict the entry its name comes from (RFC 7541 4.4).
      scratch_name_.assign(table_[name_index - kStaticTable.size() - 1].name);
    } else {
      return Error("name index " + std::to_string(name_index) + " past the table");
    }
    name_high_ = std::max(name_high_, scratch_name_.size());
    RETURN_IF_ERROR(read_string(block, pos, scratch_value_, limits_.max_field_bytes));
    value_high_ = std::max(value_high_, scratch_value_.size());
    if (scratch_name_.size() + scratch_value_.size() > limits_.max_field_bytes) {
      return Error("field of " + std::to_string(scratch_name_.size() + scratch_value_.size()) +
                   " bytes over the bound " + std::to_string(limits_.max_field_bytes));
    }
    const std::string_view name(scratch_name_.data(), scratch_name_.size());
    const std::string_view value(scratch_value_.data(), scratch_value_.size());
    if (indexing) insert(name, value);
    field(name, value);
    field_seen = true;
  }
  return ok_status();
}

void Decoder::release_large_scratch() {
  // An idle connection keeps small buffers only: one large field does not pin its size.
  if (scratch_name_.capacity() > kKeptScratchBytes) WipedString().swap(scratch_name_);
  if (scratch_value_.capacity() > kKeptScratchBytes) WipedString().swap(scratch_value_);
}

}  // namespace sonde::agent::hpack
