// Unit tests of the CPU profile pieces that need no kernel: profile building (pprof fields,
// merging, folded stacks).
#include <gtest/gtest.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "agent/cpu/profile.pb.h"
#include "agent/cpu/profile_builder.h"
#include "agent/stacks/perf_map.h"
#include "agent/stacks/stack_symbolizer.h"
#include "agent/stacks/vdso.h"
#include "agent/symbols/tests/temp_dir.h"

namespace sonde::agent::cpu {
namespace {

std::string gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out(1 << 20, '\0');
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

stacks::Location loc(std::string module, uint64_t address, std::vector<stacks::Line> lines) {
  return {std::move(module), "abcd", address, std::move(lines)};
}

TEST(ProfileBuilderTest, WritesPprofAndFoldedStacks) {
  ProfileBuilder b(100);
  // Leaf first; the Go location has an inlined frame (innermost first).
  std::vector<stacks::Location> stack = {
      loc("/bin/app", 0x1010, {{"main.inner", "a.go", 7}, {"main.outer", "a.go", 12}}),
      loc("/bin/app", 0x2000, {{"main.main", "a.go", 20}}),
  };
  SampleOwner owner{42, "ns", "pod", "c", false};
  b.add(owner, stack, 3);
  b.add(owner, stack, 2);  // merged with the first
  SampleOwner blocked{42, "ns", "pod", "c", true};
  b.add(blocked, std::vector<stacks::Location>{loc("[jit]", 0x7000, {{"JS:*f;g", "", 0}})}, 1);
  EXPECT_EQ(b.total_samples(), 6u);
  EXPECT_EQ(b.distinct_stacks(), 2u);

  EXPECT_EQ(b.folded(), "JS:*f:g 1\nmain.main;main.outer;main.inner 5\n");

  auto gz = b.pprof_gzip();
  ASSERT_TRUE(gz.ok());
  pprof::Profile p;
  ASSERT_TRUE(p.ParseFromString(gunzip(*gz)));
  auto str = [&](int64_t i) { return p.string_table(static_cast<int>(i)); };
  EXPECT_EQ(str(0), "");
  ASSERT_EQ(p.sample_type_size(), 2);
  EXPECT_EQ(str(p.sample_type(0).type()), "samples");
  EXPECT_EQ(str(p.sample_type(1).type()), "cpu");
  EXPECT_EQ(str(p.sample_type(1).unit()), "nanoseconds");
  EXPECT_EQ(p.period(), 10'000'000);
  ASSERT_EQ(p.sample_size(), 2);
  int64_t five = 0;
  for (const auto& s : p.sample()) {
    if (s.value(0) == 5) {
      five = s.value(1);
      ASSERT_EQ(s.location_id_size(), 2);
      const auto& leaf = p.location(static_cast<int>(s.location_id(0) - 1));
      EXPECT_EQ(leaf.address(), 0x1010u);
      ASSERT_EQ(leaf.line_size(), 2);
      EXPECT_EQ(str(p.function(static_cast<int>(leaf.line(0).function_id() - 1)).name()),
                "main.inner");
      EXPECT_EQ(leaf.line(0).line(), 7);
      const auto& mapping = p.mapping(static_cast<int>(leaf.mapping_id() - 1));
      EXPECT_EQ(str(mapping.filename()), "/bin/app");
      EXPECT_EQ(str(mapping.build_id()), "abcd");
      std::map<std::string, std::string> labels;
      for (const auto& l : s.label()) {
        labels[str(l.key())] = l.str() ? str(l.str()) : std::to_string(l.num());
      }
      EXPECT_EQ(labels,
                (std::map<std::string, std::string>{
                    {"pid", "42"}, {"namespace", "ns"}, {"pod", "pod"}, {"container", "c"}}));
    }
  }
  EXPECT_EQ(five, 50'000'000);
}

}  // namespace
}  // namespace sonde::agent::cpu
