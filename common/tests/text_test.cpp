#include "common/text.h"

#include <gtest/gtest.h>

namespace sonde {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(ValidUtf8, KeepsValidText) {
  for (std::string s : {"", "/usr/bin/node", "caf\xC3\xA9", "\xE2\x82\xAC 5", "\xF0\x9F\x98\x80"}) {
    EXPECT_EQ(valid_utf8(s), s);
    EXPECT_TRUE(is_valid_utf8(s));
  }
}

TEST(ValidUtf8, ReplacesEachIllFormedByte) {
  EXPECT_EQ(valid_utf8("/tmp/\xFF"), "/tmp/" + kFffd);
  EXPECT_EQ(valid_utf8("\x80x"), kFffd + "x");                         // stray continuation
  EXPECT_EQ(valid_utf8("\xC3"), kFffd);                                // truncated
  EXPECT_EQ(valid_utf8("\xC0\xAF"), kFffd + kFffd);                    // overlong '/'
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);        // surrogate D800
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80").size(), 4 * kFffd.size());  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("/tmp/\xFF"));
  EXPECT_TRUE(is_valid_utf8(valid_utf8("\xFF\xFE\xC3(\xE2\x82")));
}

TEST(ValidUtf8, CutsAtACharacterBoundary) {
  EXPECT_EQ(valid_utf8("ab\xC3\xA9", 3), "ab");  // never half of the é
  EXPECT_EQ(valid_utf8("ab\xC3\xA9", 4), "ab\xC3\xA9");
  EXPECT_EQ(valid_utf8("a\xFF", 3), "a");  // nor half of the replacement
  EXPECT_EQ(valid_utf8("abcdef", 0), "");
}

}  // namespace
}  // namespace sonde
