// V8 frames of a real node, sampled by the real kernel and named from the process's heap:
// a known function at a known file:line (truth: the script's source) blocking the loop, in each
// V8 tier node reaches without help (interpreted first, then optimized), and under GC churn.
// Needs root (ctest label: bpf).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "agent/cpu/sampler.h"
#include "agent/tests/child_process.h"
#include "agent/v8/v8_heap.h"
#include "agent/v8/v8_layout.h"

namespace sonde::agent::cpu {
namespace {

using sonde::testing::ChildProcess;

const std::string kScript = SONDE_CPU_TEST_DIR "/js_burn.js";

std::string node_binary() {
  const char* env = std::getenv("SONDE_TEST_NODE");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/node";
}

// The truth: the 1-based line of `function <name>(` in the script.
int64_t line_of(const std::string& name) {
  std::ifstream in(kScript);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find("function " + name + "(") != std::string::npos) return n;
  }
  return 0;
}

struct Tally {
  uint64_t samples = 0;        // samples of the process
  uint64_t with_target = 0;    // samples with a frame named target at its exact file:line
  uint64_t target_in_jit = 0;  // of those, the frame's pc was outside node's binary (JIT code)
  uint64_t wrong = 0;          // frames named something the script does not define
  uint64_t js_frames = 0;      // frames whose slots named a function, and those that did not
  uint64_t unnamed = 0;
  std::map<std::string, uint64_t> names;
};

class V8FramesTest : public ::testing::Test {
 protected:
  // Samples node running the script (with extra node flags) for `seconds` and names its frames.
  Tally run(std::vector<std::string> node_args, const std::string& script_arg, int seconds) {
    Tally t;
    std::vector<std::string> argv = {node_binary()};
    for (auto& a : node_args) argv.push_back(a);
    argv.push_back(kScript);
    if (!script_arg.empty()) argv.push_back(script_arg);
    ChildProcess node(argv);
    EXPECT_TRUE(node.wait_for_line("ready", std::chrono::seconds(20)));
    auto layout = v8::read_process_v8_layout("/proc", node.pid());
    EXPECT_TRUE(layout.ok()) << layout.error().message();
    if (!layout.ok()) return t;

    SamplerOptions options;
    options.frequency_hz = 99;
    auto sampler = CpuSampler::start(options);
    EXPECT_TRUE(sampler.ok()) << sampler.error().message();
    if (!sampler.ok()) return t;
    EXPECT_TRUE((*sampler)->select_pid(node.pid()).ok());
    EXPECT_TRUE((*sampler)
                    ->watch_v8(node.pid(), {layout->fp_function, layout->fp_context_or_frame_type,
                                            layout->fp_bytecode_offset})
                    .ok());
    // node's own code (the interpreter and other builtins are embedded in it); JIT code is not.
    std::vector<std::pair<uint64_t, uint64_t>> node_code;
    {
      char exe[4096];
      const ssize_t n =
          readlink(("/proc/" + std::to_string(node.pid()) + "/exe").c_str(), exe, sizeof exe);
      std::ifstream maps("/proc/" + std::to_string(node.pid()) + "/maps");
      for (std::string line; n > 0 && std::getline(maps, line);) {
        if (!line.ends_with(std::string(exe, static_cast<size_t>(n)))) continue;
        node_code.emplace_back(std::stoull(line.substr(0, line.find('-')), nullptr, 16),
                               std::stoull(line.substr(line.find('-') + 1), nullptr, 16));
      }
    }
    auto in_node = [&](uint64_t pc) {
      for (const auto& [a, b] : node_code) {
        if (pc >= a && pc < b) return true;
      }
      return false;
    };
    const v8::ProcessMemory memory(node.pid());
    v8::V8Namer namer(*layout, memory);
    const int64_t truth = line_of("burnBlocking");
    const std::set<std::string> defined = {"burnBlocking", "(anonymous)", "listOnTimeout",
                                           "processTimers"};
    for (int round = 0; round < seconds * 2; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      auto samples = (*sampler)->drain();
      EXPECT_TRUE(samples.ok());
      if (!samples.ok()) break;
      for (const RawSample& s : *samples) {
        if (s.pid != static_cast<uint32_t>(node.pid())) continue;
        t.samples += s.count;
        bool hit = false;
        bool jit = false;
        for (size_t i = 0; i < s.v8.size(); ++i) {
          const auto& f = s.v8[i];
          if (i >= s.user.size() || s.user[i] != f.pc) break;  // the walks must agree
          auto name = namer.name(f.function, f.context_or_type);
          if (!name) {
            ++t.unnamed;
            continue;
          }
          ++t.js_frames;
          t.names[name->function + " " + name->script + ":" + std::to_string(name->line)] +=
              s.count;
          if (name->function == "burnBlocking" && name->script == kScript && name->line == truth) {
            hit = true;
            jit = jit || !in_node(f.pc);
          }
          if (name->script == kScript && !defined.contains(name->function)) ++t.wrong;
          if (name->function == "burnBlocking" &&
              (name->script != kScript || name->line != truth)) {
            ++t.wrong;
          }
        }
        if (hit) t.with_target += s.count;
        if (hit && jit) t.target_in_jit += s.count;
      }
    }
    const auto& st = namer.stats();
    std::ostringstream why;
    for (const auto& [n, c] : t.names) why << "  " << n << ": " << c << "\n";
    RecordProperty("named", std::to_string(st.named));
    std::cout << "samples " << t.samples << ", with burnBlocking at its line " << t.with_target
              << " (in JIT code " << t.target_in_jit << ")"
              << ", named frames " << st.named << " (cache hits " << st.cache_hits << "), typed "
              << st.typed_frame << ", not a function " << st.not_function << ", inconsistent "
              << st.inconsistent << ", over budget " << st.over_budget << ", no line " << st.no_line
              << "\n"
              << why.str();
    return t;
  }
};

TEST_F(V8FramesTest, NamesTheBlockingFunctionOfAPlainNode) {
  Tally t = run({}, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NamesInterpretedFrames) {
  // Keeps every function in Ignition: what is checked is the interpreted frame.
  Tally t = run({"--no-opt", "--no-sparkplug", "--no-maglev"}, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  EXPECT_EQ(t.target_in_jit, 0u);  // the interpreter runs from node's binary
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NamesOptimizedFrames) {
  // Optimizes at once: the blocking loop runs as TurboFan code.
  Tally t = run({"--always-turbofan"}, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  // The rest sit in frameless builtins (Math.sqrt, Date.now) called from that code: their pc is
  // in node's binary and the frame pointer still the optimized function's.
  EXPECT_GE(t.target_in_jit * 100, t.with_target * 60);
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NoWrongNamesUnderGcChurn) {
  Tally t = run({}, "churn", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_EQ(t.wrong, 0u);
  std::cout << "unnamed share under churn: " << t.unnamed << " of " << (t.unnamed + t.js_frames)
            << " frames with V8 slots\n";
}

}  // namespace
}  // namespace sonde::agent::cpu
