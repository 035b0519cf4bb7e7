#include "common/result.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace sonde {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Error("not positive: " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  ASSIGN_OR_RETURN(int x, parse_positive(v));
  return x * 2;
}

Status check_both(int a, int b) {
  RETURN_IF_ERROR(parse_positive(a));
  RETURN_IF_ERROR(parse_positive(b));
  return ok_status();
}

TEST(Result, ValueAndError) {
  auto good = parse_positive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "not positive: -1");
}

TEST(Result, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*doubled(4), 8);
  EXPECT_EQ(doubled(0).error().message(), "not positive: 0");
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, -2).error().message(), "not positive: -2");
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  auto p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(Error, ErrnoAndWrap) {
  auto e = errno_error("open /nope", ENOENT).wrap("resolve");
  EXPECT_EQ(e.code(), ENOENT);
  EXPECT_EQ(e.message(), "resolve: open /nope: No such file or directory");
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  auto bad = parse_positive(0);
  EXPECT_DEATH((void)bad.value(), "");
}

}  // namespace
}  // namespace sonde
