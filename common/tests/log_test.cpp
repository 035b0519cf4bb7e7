#include "common/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sonde::log {
namespace {

TEST(Log, LogfmtQuotesOnlyWhatNeedsIt) {
  auto line = format_line(Format::kLogfmt, Level::kWarn, "probe attached",
                          {{"binary", "/usr/bin/node"}, {"pid", 42}, {"note", "a \"b\"=c"}});
  EXPECT_NE(line.find(" level=warn msg=\"probe attached\" binary=/usr/bin/node pid=42"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(R"(note="a \"b\"=c")"), std::string::npos) << line;
  EXPECT_EQ(line.rfind("ts=", 0), 0u);
}

TEST(Log, JsonIsValidAndTyped) {
  auto line = format_line(Format::kJson, Level::kError, "bad\nthing",
                          {{"count", 3}, {"ok", false}, {"path", "x\ty"}});
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["msg"], "bad\nthing");
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["path"], "x\ty");
}

TEST(Log, LevelsFilter) {
  set_level(Level::kWarn);
  EXPECT_FALSE(enabled(Level::kInfo));
  EXPECT_TRUE(enabled(Level::kError));
  set_level(Level::kInfo);
  EXPECT_TRUE(enabled(Level::kInfo));
  EXPECT_EQ(parse_level("debug"), Level::kDebug);
  EXPECT_EQ(parse_level("loud"), std::nullopt);
}

}  // namespace
}  // namespace sonde::log
