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

#include "agent/stacks/sampler.h"
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

// Whether this node's V8 knows an option (they were renamed across V8 versions).
bool has_v8_option(const std::string& option) {
  const std::string options = sonde::testing::command_output(node_binary() + " --v8-options");
  return options.find("\n  --" + option + " ") != std::string::npos;
}

// The second source of truth: V8's own names of the functions it compiled, from the perf map
// of a run of the same script with --perf-basic-prof: "name file:line" for each
// "JS:*name file:line:column" (node >= 20) or "LazyCompile:~name file:line" (node 18).
std::set<std::string> perf_map_truth(std::vector<std::string> node_args,
                                     const std::string& script_arg) {
  std::vector<std::string> argv = {node_binary(), "--perf-basic-prof"};
  for (auto& a : node_args) argv.push_back(a);
  argv.push_back(kScript);
  if (!script_arg.empty()) argv.push_back(script_arg);
  std::set<std::string> truth;
  pid_t pid = 0;
  {
    ChildProcess node(argv);
    if (!node.wait_for_line("ready", std::chrono::seconds(20))) return truth;
    pid = node.pid();
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  const std::string map = "/tmp/perf-" + std::to_string(pid) + ".map";
  std::ifstream in(map);
  for (std::string line; std::getline(in, line);) {
    // "<start> <size> <type>:<tier><name> <file>:<line>[:<column>]"
    std::istringstream f(line);
    std::string start, size, what, where;
    if (!(f >> start >> size >> what >> where)) continue;
    const size_t colon = what.find(':');
    if (colon == std::string::npos || colon + 1 >= what.size()) continue;
    std::string name = what.substr(colon + 1);
    if (std::string("*~^+-").find(name[0]) != std::string::npos) name.erase(0, 1);
    // Strip a column, keep "file:line".
    const size_t last = where.rfind(':');
    const size_t before = last == std::string::npos ? last : where.rfind(':', last - 1);
    if (before != std::string::npos && where.find_first_not_of("0123456789", before + 1) == last) {
      where.erase(last);
    }
    truth.insert(name + " " + where);
  }
  std::remove(map.c_str());
  return truth;
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
  // When `truth` is given, every frame named with a script must be in it.
  Tally run(std::vector<std::string> node_args, const std::string& script_arg, int seconds,
            const std::set<std::string>* truth_names = nullptr) {
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

    stacks::SamplerOptions options;
    options.frequency_hz = 99;
    auto sampler = stacks::CpuSampler::start(options);
    EXPECT_TRUE(sampler.ok()) << sampler.error().message();
    if (!sampler.ok()) return t;
    EXPECT_TRUE((*sampler)->select_pid(node.pid()).ok());
    EXPECT_TRUE((*sampler)
                    ->watch_v8(node.pid(), {layout->fp_function, layout->fp_context_or_frame_type,
                                            layout->js_function_shared - layout->heap_object_tag})
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
      for (const stacks::RawSample& s : *samples) {
        if (s.pid != static_cast<uint32_t>(node.pid())) continue;
        t.samples += s.count;
        bool hit = false;
        bool jit = false;
        for (size_t i = 0; i < s.v8.size(); ++i) {
          const auto& f = s.v8[i];
          if (i >= s.user.size() || s.user[i] != f.pc) break;  // the walks must agree
          auto name = namer.name(f.function, f.context_or_type, f.shared);
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
          // The perf map lists compiled code only: a node-internal function that ran only in
          // the interpreter, named without a line (its source is external), is not in it, so
          // it is printed, not counted either way. The script's own functions are held to the
          // `defined` set above whatever the tier.
          const bool unverifiable = name->script.starts_with("node:") && name->line == 0;
          if (truth_names && !name->script.empty() &&
              !truth_names->contains(name->function + " " + name->script + ":" +
                                     std::to_string(name->line))) {
            std::cout << "not in the perf map" << (unverifiable ? " (unverifiable)" : "") << ": "
                      << name->function << " " << name->script << ":" << name->line << "\n";
            if (!unverifiable) ++t.wrong;
          }
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
              << st.inconsistent << ", moved " << st.moved << ", over budget " << st.over_budget
              << ", no line " << st.no_line << "\n"
              << why.str();
    return t;
  }
};

TEST_F(V8FramesTest, NamesTheBlockingFunctionOfAPlainNode) {
  const std::set<std::string> truth = perf_map_truth({}, "");
  ASSERT_TRUE(
      truth.contains("burnBlocking " + kScript + ":" + std::to_string(line_of("burnBlocking"))));
  Tally t = run({}, "", 4, &truth);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NamesInterpretedFrames) {
  // Keeps every function in Ignition: what is checked is the interpreted frame.
  std::vector<std::string> flags = {"--no-opt", "--no-sparkplug"};
  if (has_v8_option("maglev")) flags.emplace_back("--no-maglev");
  Tally t = run(flags, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  EXPECT_EQ(t.target_in_jit, 0u);  // the interpreter runs from node's binary
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NamesOptimizedFrames) {
  // Optimizes at once: the blocking loop runs as TurboFan code.
  Tally t = run({has_v8_option("always-turbofan") ? "--always-turbofan" : "--always-opt"}, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  // The rest sit in frameless builtins (Math.sqrt, Date.now) called from that code: their pc is
  // in node's binary and the frame pointer still the optimized function's.
  EXPECT_GE(t.target_in_jit * 100, t.with_target * 60);
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NamesBaselineFrames) {
  // Sparkplug compiles every function at once; nothing above it runs.
  std::vector<std::string> flags = {"--always-sparkplug", "--no-opt"};
  if (has_v8_option("maglev")) flags.emplace_back("--no-maglev");
  Tally t = run(flags, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  EXPECT_GE(t.target_in_jit * 100, t.with_target * 60);  // baseline code is JIT code
  EXPECT_EQ(t.wrong, 0u);
}

TEST_F(V8FramesTest, NamesMaglevFrames) {
  if (!has_v8_option("maglev")) GTEST_SKIP() << "this V8 has no Maglev";
  // Maglev is the only compiler left: JIT code can only be its; the hot loop tiers up into it.
  Tally t = run({"--maglev", "--no-turbofan", "--no-sparkplug"}, "", 4);
  ASSERT_GT(t.samples, 100u);
  EXPECT_GE(t.with_target * 100, t.samples * 80);
  EXPECT_EQ(t.wrong, 0u);
  // Node 20 and 22 never ran the loop in Maglev code here (it stayed interpreted): the tier
  // was not exercised, say so rather than pass.
  if (t.target_in_jit == 0) GTEST_SKIP() << "this V8 did not tier up into Maglev";
  EXPECT_GE(t.target_in_jit * 100, t.with_target * 60);
}

TEST_F(V8FramesTest, NoWrongNamesUnderGcChurn) {
  const std::set<std::string> truth = perf_map_truth({}, "churn");
  Tally t = run({}, "churn", 4, &truth);
  ASSERT_GT(t.samples, 100u);
  EXPECT_EQ(t.wrong, 0u);
  std::cout << "unnamed share under churn: " << t.unnamed << " of " << (t.unnamed + t.js_frames)
            << " frames with V8 slots\n";
}

}  // namespace
}  // namespace sonde::agent::cpu
