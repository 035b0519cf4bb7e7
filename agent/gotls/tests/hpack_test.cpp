// hpack::Decoder against RFC 7541 Appendix C (the published blocks, header lists and table
// states), against a real encoder (Debian's python3-hpack: long sequences sharing one encoder
// state, Huffman on and off, table size updates, eviction, never-indexed fields, every octet
// value), and against bad input: integer overflow, a 4 GiB table size update, bad Huffman
// padding, fields over the bound.
#include "agent/gotls/hpack.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/gotls/tests/h2_test_util.h"

namespace sonde::agent::hpack {
namespace {

using sonde::agent::testing::as_string;
using sonde::agent::testing::command_lines;
using sonde::agent::testing::unhex;
using Fields = std::vector<std::pair<std::string, std::string>>;

Result<Fields> decode(Decoder& decoder, const std::vector<uint8_t>& block) {
  Fields fields;
  const Status status = decoder.decode(block, [&fields](std::string_view n, std::string_view v) {
    fields.emplace_back(std::string(n), std::string(v));
  });
  if (!status.ok()) return status.error();
  return fields;
}

Fields table_of(const Decoder& decoder) {
  Fields out;
  for (size_t i = 0; i < decoder.table_entries(); ++i) {
    const auto [name, value] = decoder.table_entry(i);
    out.emplace_back(std::string(name), std::string(value));
  }
  return out;
}

std::string error_of(const std::vector<uint8_t>& block, const Limits& limits = {}) {
  Decoder decoder(limits);
  const auto fields = decode(decoder, block);
  return fields.ok() ? std::string("no error") : fields.error().message();
}

// RFC 7541 C.2: single blocks on a fresh decoder.
TEST(HpackRfcTest, C2LiteralsAndIndexed) {
  Decoder d1;
  EXPECT_EQ(*decode(d1, unhex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")),
            (Fields{{"custom-key", "custom-header"}}));
  EXPECT_EQ(table_of(d1), (Fields{{"custom-key", "custom-header"}}));
  EXPECT_EQ(d1.table_size(), 55U);

  Decoder d2;
  EXPECT_EQ(*decode(d2, unhex("040c 2f73 616d 706c 652f 7061 7468")),
            (Fields{{":path", "/sample/path"}}));
  EXPECT_EQ(d2.table_entries(), 0U);

  Decoder d3;
  EXPECT_EQ(*decode(d3, unhex("1008 7061 7373 776f 7264 0673 6563 7265 74")),
            (Fields{{"password", "secret"}}));
  EXPECT_EQ(d3.table_entries(), 0U);

  Decoder d4;
  EXPECT_EQ(*decode(d4, unhex("82")), (Fields{{":method", "GET"}}));
  EXPECT_EQ(d4.table_entries(), 0U);
}

// C.3 (plain) and C.4 (Huffman): the same three requests on one decoder each.
void check_requests(const std::vector<std::string>& blocks) {
  Decoder d;
  const Fields first = {
      {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
  EXPECT_EQ(*decode(d, unhex(blocks[0])), first);
  EXPECT_EQ(table_of(d), (Fields{{":authority", "www.example.com"}}));
  EXPECT_EQ(d.table_size(), 57U);

  Fields second = first;
  second.emplace_back("cache-control", "no-cache");
  EXPECT_EQ(*decode(d, unhex(blocks[1])), second);
  EXPECT_EQ(table_of(d),
            (Fields{{"cache-control", "no-cache"}, {":authority", "www.example.com"}}));
  EXPECT_EQ(d.table_size(), 110U);

  const Fields third = {{":method", "GET"},
                        {":scheme", "https"},
                        {":path", "/index.html"},
                        {":authority", "www.example.com"},
                        {"custom-key", "custom-value"}};
  EXPECT_EQ(*decode(d, unhex(blocks[2])), third);
  EXPECT_EQ(table_of(d), (Fields{{"custom-key", "custom-value"},
                                 {"cache-control", "no-cache"},
                                 {":authority", "www.example.com"}}));
  EXPECT_EQ(d.table_size(), 164U);
}

TEST(HpackRfcTest, C3RequestsWithoutHuffman) {
  check_requests({"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                  "8286 84be 5808 6e6f 2d63 6163 6865",
                  "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"});
}

TEST(HpackRfcTest, C4RequestsWithHuffman) {
  check_requests({"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", "8286 84be 5886 a8eb 1064 9cbf",
                  "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"});
}

// With kept values, the C.5 responses evict exactly as the RFC's (sizes count the values whose
// bytes are dropped), and only :status keeps its value; the others read back as "".
TEST(HpackRfcTest, KeptValuesOnlyDropTheOthersBytesNotTheirSize) {
  Limits limits;
  limits.kept_values = {":status"};
  Decoder d(limits);
  const auto first = decode(d, unhex("3fe101 4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c "
                                     "2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 "
                                     "474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 "
                                     "6c65 2e63 6f6d"));
  ASSERT_TRUE(first.ok()) << first.error().message();
  // The block's own literals still reach the caller.
  EXPECT_EQ((*first)[1], (std::pair<std::string, std::string>{"cache-control", "private"}));
  EXPECT_EQ(table_of(d),
            (Fields{{"location", ""}, {"date", ""}, {"cache-control", ""}, {":status", "302"}}));
  EXPECT_EQ(d.table_size(), 222U);  // as RFC 7541 C.5.1 says
  // C.5.2: ":status 307" evicts the oldest entry, as it would with every value kept.
  const auto second = decode(d, unhex("4803 3330 37c1 c0bf"));
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_EQ(*second,
            (Fields{{":status", "307"}, {"cache-control", ""}, {"date", ""}, {"location", ""}}));
  EXPECT_EQ(d.table_size(), 222U);
}

// C.5 (plain) and C.6 (Huffman): three responses with a 256-octet table, so entries are evicted.
// The RFC's decoder starts at 256; here a size update (3fe1 01 = 256) at the start of the first
// block sets it, as an encoder would after SETTINGS_HEADER_TABLE_SIZE = 256.
void check_responses(const std::vector<std::string>& blocks) {
  Decoder d;
  const std::string first_block = "3fe101" + blocks[0];
  const Fields first = {{":status", "302"},
                        {"cache-control", "private"},
                        {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                        {"location", "https://www.example.com"}};
  EXPECT_EQ(*decode(d, unhex(first_block)), first);
  EXPECT_EQ(d.max_table_size(), 256U);
  EXPECT_EQ(table_of(d), (Fields{{"location", "https://www.example.com"},
                                 {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                 {"cache-control", "private"},
                                 {":status", "302"}}));
  EXPECT_EQ(d.table_size(), 222U);

  Fields second = first;
  second[0].second = "307";
  EXPECT_EQ(*decode(d, unhex(blocks[1])), second);
  EXPECT_EQ(table_of(d), (Fields{{":status", "307"},
                                 {"location", "https://www.example.com"},
                                 {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                 {"cache-control", "private"}}));
  EXPECT_EQ(d.table_size(), 222U);

  const std::string cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
  EXPECT_EQ(*decode(d, unhex(blocks[2])), (Fields{{":status", "200"},
                                                  {"cache-control", "private"},
                                                  {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
                                                  {"location", "https://www.example.com"},
                                                  {"content-encoding", "gzip"},
                                                  {"set-cookie", cookie}}));
  EXPECT_EQ(table_of(d), (Fields{{"set-cookie", cookie},
                                 {"content-encoding", "gzip"},
                                 {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}}));
  EXPECT_EQ(d.table_size(), 215U);
}

TEST(HpackRfcTest, C5ResponsesWithoutHuffmanEvict) {
  check_responses(
      {"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230"
       "3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65"
       "7861 6d70 6c65 2e63 6f6d",
       "4803 3330 37c1 c0bf",
       "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220"
       "474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157"
       "454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076"
       "6572 7369 6f6e 3d31"});
}

TEST(HpackRfcTest, C6ResponsesWithHuffmanEvict) {
  check_responses(
      {"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0"
       "82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
       "4883 640e ffc1 c0bf",
       "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b"
       "d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27"
       "0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07"});
}

TEST(HpackHuffmanTest, RfcStrings) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"},
      {"a8eb 1064 9cbf", "no-cache"},
      {"6402", "302"},
      {"aec3 771a 4b", "private"},
      {"9bd9 ab", "gzip"},
      {"", ""},
  };
  for (const auto& [hex, want] : cases) {
    std::string out;
    ASSERT_TRUE(huffman_decode(unhex(hex), out, 1000).ok()) << hex;
    EXPECT_EQ(out, want);
  }
}

TEST(HpackHuffmanTest, PaddingAndEosErrors) {
  std::string out;
  // 'a' (00011) then 11 one bits: padding longer than 7 bits.
  auto status = huffman_decode(unhex("1fff"), out, 100);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("padding longer"), std::string::npos);
  // 'a' then 000: padding that is not a prefix of EOS.
  out.clear();
  status = huffman_decode(unhex("18"), out, 100);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("not a prefix of EOS"), std::string::npos);
  // 30 one bits: EOS itself.
  out.clear();
  status = huffman_decode(unhex("ffffffff"), out, 100);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("EOS"), std::string::npos);
  // 7 one bits after 'a' are valid padding ("a" = 00011 111).
  out.clear();
  EXPECT_TRUE(huffman_decode(unhex("1f"), out, 100).ok());
  EXPECT_EQ(out, "a");
  // The bound: "www.example.com" decodes to 15 octets.
  out.clear();
  EXPECT_FALSE(huffman_decode(unhex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"), out, 14).ok());
}

TEST(HpackBadInputTest, IntegersAndIndexes) {
  // 5-bit prefix all ones then continuation octets summing past 2^32.
  EXPECT_NE(error_of(unhex("3f ff ff ff ff 0f")).find("overflow"), std::string::npos);
  // A table size update to 4 GiB (2^32): overflow. 4 GiB - 1: over the bound.
  EXPECT_NE(error_of(unhex("3f e1 ff ff ff 0f")).find("overflow"), std::string::npos);
  EXPECT_NE(error_of(unhex("3f e0 ff ff ff 0f")).find("over the bound"), std::string::npos);
  // Six continuation octets (zero-valued ones keep the value small): too long.
  EXPECT_NE(error_of(unhex("3f 80 80 80 80 80 00")).find("longer than 5"), std::string::npos);
  EXPECT_NE(error_of(unhex("3f 80")).find("truncated"), std::string::npos);
  // Indexed field 0, and past the (empty) dynamic table.
  EXPECT_NE(error_of(unhex("80")).find("index 0"), std::string::npos);
  EXPECT_NE(error_of(unhex("be")).find("past the table"), std::string::npos);
  EXPECT_NE(error_of(unhex("7f 00 01 61")).find("past the table"), std::string::npos);
  // A string longer than what is left of the block.
  EXPECT_NE(error_of(unhex("40 05 61 62")).find("past the end"), std::string::npos);
  EXPECT_NE(error_of(unhex("40")).find("truncated"), std::string::npos);
}

TEST(HpackBadInputTest, TableSizeUpdates) {
  // After a field: not allowed (RFC 7541 4.2).
  EXPECT_NE(error_of(unhex("82 20")).find("after a field"), std::string::npos);
  // Two at the start are allowed; up to the bound and not past it.
  EXPECT_EQ(error_of(unhex("20 3fe11f 82")), "no error");  // 0, then 4096
  Limits limits;
  limits.max_table_size = 65536;
  EXPECT_EQ(error_of(unhex("3f e1 ff 03"), limits), "no error");  // 65536
  EXPECT_NE(error_of(unhex("3f e2 ff 03"), limits).find("over the bound"), std::string::npos);
  // A shrink evicts.
  Decoder d;
  ASSERT_TRUE(
      decode(d, unhex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")).ok());
  EXPECT_EQ(d.table_entries(), 1U);
  ASSERT_TRUE(decode(d, unhex("3f 17")).ok());  // 54 < 55: the entry goes
  EXPECT_EQ(d.table_entries(), 0U);
  EXPECT_EQ(d.max_table_size(), 54U);
}

TEST(HpackBadInputTest, FieldBound) {
  Limits limits;
  limits.max_field_bytes = 100;
  // A literal value of 101 octets, then name 50 + value 51 octets: both over 100.
  std::vector<uint8_t> block = unhex("00 01 6e 65");  // name "n", value of 101 octets
  block.insert(block.end(), 101, 'v');
  EXPECT_NE(error_of(block, limits).find("longer than the field bound"), std::string::npos);
  block = unhex("00 32");
  block.insert(block.end(), 50, 'n');
  block.push_back(51);
  block.insert(block.end(), 51, 'v');
  EXPECT_NE(error_of(block, limits).find("over the bound"), std::string::npos);
  // Huffman strings are bounded after decoding: 70 octets of 'a' codes (5 bits each) give 112.
  block = unhex("00 01 6e c6");  // Huffman, length 70
  for (int i = 0; i < 14; ++i) {
    const auto five = unhex("18c6318c63");  // 8 x 'a' in 40 bits
    block.insert(block.end(), five.begin(), five.end());
  }
  EXPECT_NE(error_of(block, limits).find("field bound"), std::string::npos);
}

// A small block that references one large entry again and again costs time, not memory.
TEST(HpackBadInputTest, RepeatedReferencesAreNotMaterialised) {
  Decoder d;
  std::vector<uint8_t> block = unhex("40 01 6e 7f f1 1d");  // "n": 127 + 0x71 + 29*128 octets
  const size_t value_size = 127 + 0x71 + 29 * 128;
  block.insert(block.end(), value_size, 'v');
  block.insert(block.end(), 10000, 0xbe);  // index 62, ten thousand times
  size_t fields = 0;
  size_t bytes = 0;
  ASSERT_TRUE(d.decode(block, [&](std::string_view n, std::string_view v) {
                 ++fields;
                 bytes += n.size() + v.size();
               }).ok());
  EXPECT_EQ(fields, 10001U);
  EXPECT_GT(bytes, 10000 * value_size);
  EXPECT_LT(d.memory(), 2 * Decoder::kDefaultTableSize + 2 * value_size);
}

// Ground truth: header blocks from Debian's python3-hpack Encoder.
TEST(HpackGroundTruthTest, PythonHpackEncoder) {
  const auto lines = command_lines(std::string(SONDE_PYTHON3) + " " + SONDE_HPACK_BLOCKS_PY);
  ASSERT_GT(lines.size(), 1000U);
  std::unique_ptr<Decoder> decoder;
  std::string sequence;
  Fields got;
  Fields want;
  size_t blocks = 0;
  size_t fields = 0;
  size_t sequences = 0;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string kind;
    std::string arg;
    in >> kind >> arg;
    if (kind == "seq") {
      decoder = std::make_unique<Decoder>();
      sequence = arg;
      ++sequences;
    } else if (kind == "block") {
      ASSERT_NE(decoder, nullptr);
      auto decoded = decode(*decoder, unhex(arg));
      ASSERT_TRUE(decoded.ok()) << sequence << " block " << blocks << ": "
                                << decoded.error().message();
      got = std::move(*decoded);
      want.clear();
      ++blocks;
    } else if (kind == "field") {
      const size_t colon = arg.find(':');
      want.emplace_back(as_string(unhex(arg.substr(0, colon))),
                        as_string(unhex(arg.substr(colon + 1))));
      ++fields;
    } else if (kind == "table") {
      ASSERT_EQ(got, want) << sequence << " block " << blocks;
      ASSERT_EQ(decoder->table_size(), std::stoul(arg)) << sequence << " block " << blocks;
    }
  }
  EXPECT_EQ(sequences, 4U);
  EXPECT_GT(blocks, 700U);
  EXPECT_GT(fields, 6000U);
}

}  // namespace
}  // namespace sonde::agent::hpack
