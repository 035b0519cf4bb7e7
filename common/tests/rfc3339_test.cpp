#include "common/rfc3339.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sonde {
namespace {

using std::chrono::microseconds;

// 2026-11-29T09:00:00Z plus `us` microseconds.
WallTime at(int64_t us) {
  return std::chrono::system_clock::from_time_t(1795942800) + microseconds(us);
}

TEST(Rfc3339Test, FormatsWholeMillisAndMicroSeconds) {
  EXPECT_EQ(format_rfc3339(at(0)), "2026-11-29T09:00:00Z");
  EXPECT_EQ(format_rfc3339(at(123'456)), "2026-11-29T09:00:00Z") << "truncated";
  EXPECT_EQ(format_rfc3339(at(123'456), 3), "2026-11-29T09:00:00.123Z");
  EXPECT_EQ(format_rfc3339(at(123'456), 6), "2026-11-29T09:00:00.123456Z");
  EXPECT_EQ(format_rfc3339(at(999'999), 3), "2026-11-29T09:00:00.999Z") << "never rounded up";
  EXPECT_EQ(format_rfc3339(at(7), 6), "2026-11-29T09:00:00.000007Z");
  EXPECT_EQ(format_rfc3339(at(123'456), 4), "2026-11-29T09:00:00Z") << "only 0, 3 or 6 digits";
  EXPECT_EQ(format_rfc3339(WallTime{} - microseconds(1), 6), "1969-12-31T23:59:59.999999Z");
}

TEST(Rfc3339Test, ParsesZonesAndFractionsAndRefusesTheRest) {
  const auto t = parse_rfc3339("2026-11-29T09:00:00Z");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 1795942800);
  EXPECT_EQ(parse_rfc3339("2026-11-29T10:00:00.123+01:00"), t);
  EXPECT_EQ(parse_rfc3339("2026-11-29T08:30:00-00:30"), t);
  EXPECT_EQ(parse_rfc3339("2026-11-29T09:00:00.000000Z"), t) << "a Lease's MicroTime";
  EXPECT_FALSE(parse_rfc3339("yesterday").has_value());
  EXPECT_FALSE(parse_rfc3339("2026-11-29T09:00:00").has_value()) << "no zone";
  EXPECT_FALSE(parse_rfc3339("2026-11-29T09:00:00Zjunk").has_value());
}

TEST(Rfc3339Test, WhatIsFormattedParsesBackToTheSecond) {
  for (int digits : {0, 3, 6}) {
    auto back = parse_rfc3339(format_rfc3339(at(123'456), digits));
    ASSERT_TRUE(back.has_value()) << digits;
    EXPECT_EQ(*back, at(0)) << digits;
  }
}

}  // namespace
}  // namespace sonde
