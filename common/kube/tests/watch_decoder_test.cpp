#include "common/kube/watch_decoder.h"

#include <gtest/gtest.h>

namespace sonde::kube {
namespace {

std::vector<WatchEvent> feed_all(WatchDecoder& decoder, std::string_view bytes) {
  std::vector<WatchEvent> out;
  Status status = decoder.feed(bytes, [&](WatchEvent e) {
    out.push_back(std::move(e));
    return true;
  });
  EXPECT_TRUE(status.ok()) << status.error().message();
  return out;
}

const std::string kTwoEvents =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"x5\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"x9\"}}}\n";

TEST(WatchDecoderTest, DecodesEventsSplitAtEveryPossibleByte) {
  for (size_t cut = 0; cut <= kTwoEvents.size(); ++cut) {
    WatchDecoder decoder;
    auto events = feed_all(decoder, std::string_view(kTwoEvents).substr(0, cut));
    auto rest = feed_all(decoder, std::string_view(kTwoEvents).substr(cut));
    events.insert(events.end(), rest.begin(), rest.end());
    ASSERT_EQ(events.size(), 2u) << "cut at " << cut;
    EXPECT_EQ(events[0].type, WatchEvent::Type::kAdded);
    EXPECT_EQ(resource_version_of(events[0].object), "x5");
    EXPECT_EQ(events[1].type, WatchEvent::Type::kBookmark);
    EXPECT_EQ(decoder.pending_bytes(), 0u);
  }
}

TEST(WatchDecoderTest, OneByteAtATime) {
  WatchDecoder decoder;
  size_t count = 0;
  for (char c : kTwoEvents) count += feed_all(decoder, std::string_view(&c, 1)).size();
  EXPECT_EQ(count, 2u);
}

TEST(WatchDecoderTest, KeepsAnIncompleteTailUndelivered) {
  WatchDecoder decoder;
  auto events = feed_all(decoder, kTwoEvents.substr(0, kTwoEvents.size() - 10));
  EXPECT_EQ(events.size(), 1u);
  EXPECT_GT(decoder.pending_bytes(), 0u);
}

TEST(WatchDecoderTest, ParsesErrorEventsWithTheirStatus) {
  auto event = parse_watch_event(
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})");
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(event->type, WatchEvent::Type::kError);
  EXPECT_EQ(event->object["code"], 410);
}

TEST(WatchDecoderTest, RejectsMalformedInput) {
  for (const char* bad : {"not json", "[]", R"({"type":"ADDED"})", R"({"type":"NOPE","object":{}})",
                          R"({"type":3,"object":{}})", R"({"type":"ADDED","object":"x"})"}) {
    WatchDecoder decoder;
    Status status = decoder.feed(std::string(bad) + "\n", [](WatchEvent) { return true; });
    EXPECT_FALSE(status.ok()) << bad;
  }
}

TEST(WatchDecoderTest, StopsWhenTheConsumerSaysSo) {
  WatchDecoder decoder;
  int calls = 0;
  ASSERT_TRUE(decoder.feed(kTwoEvents, [&](WatchEvent) { return ++calls < 1; }).ok());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace sonde::kube
