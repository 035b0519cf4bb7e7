// CPU profiles of real programs with one known hot function each (C, Go, stripped Go, Node.js
// JIT code), served through the agent's HTTP route, decoded as pprof and read by
// `go tool pprof`; and blocked=true against a Node.js loop blocked in a named function.
// Needs root (ctest label: bpf).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "agent/cpu/cpu_feature.h"
#include "agent/cpu/cpu_profiler.h"
#include "agent/cpu/profile.pb.h"
#include "agent/cpu/pyroscope_pusher.h"
#include "agent/metrics/metrics_server.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/tests/child_process.h"
#include "agent/tests/http_get.h"
#include "common/testing/manual_clock.h"

namespace sonde::agent::cpu {
namespace {

using sonde::testing::ChildProcess;
using sonde::testing::command_output;
using sonde::testing::http_get;
using sonde::testing::HttpResult;
using std::chrono::milliseconds;

// User + system CPU seconds of a process so far, from /proc/<pid>/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  std::istringstream f(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && f >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string gunzip(const std::string& in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return {};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[65536];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

// A decoded profile and questions about it.
struct Decoded {
  pprof::Profile p;

  const std::string& str(int64_t i) const { return p.string_table(static_cast<int>(i)); }
  const pprof::Location& location(uint64_t id) const {
    return p.location(static_cast<int>(id - 1));
  }
  std::string function(uint64_t id) const {
    return str(p.function(static_cast<int>(id - 1)).name());
  }
  int64_t total() const {
    int64_t n = 0;
    for (const auto& s : p.sample()) n += s.value(0);
    return n;
  }
  // Samples with a frame (any line of any location) whose function name holds needle; when
  // exact, the name must equal it.
  int64_t with(const std::string& needle, bool exact = false) const {
    int64_t n = 0;
    for (const auto& s : p.sample()) {
      bool hit = false;
      for (uint64_t id : s.location_id()) {
        for (const auto& line : location(id).line()) {
          std::string f = function(line.function_id());
          if (exact ? f == needle : f.find(needle) != std::string::npos) hit = true;
        }
      }
      if (hit) n += s.value(0);
    }
    return n;
  }
  // The function with the most samples in its stack (inclusive), excluding frames of modules
  // every JS stack passes through (node itself, the kernel).
  std::string top_jit_function() const {
    std::map<std::string, int64_t> counts;
    for (const auto& s : p.sample()) {
      std::set<std::string> seen;
      for (uint64_t id : s.location_id()) {
        const auto& loc = location(id);
        if (str(p.mapping(static_cast<int>(loc.mapping_id() - 1)).filename()) != "[jit]") continue;
        for (const auto& line : loc.line()) seen.insert(function(line.function_id()));
      }
      for (const auto& f : seen) counts[f] += s.value(0);
    }
    std::string best;
    int64_t most = -1;
    for (const auto& [f, n] : counts) {
      if (n > most) best = f, most = n;
    }
    return best;
  }
};

class CpuProfilerTest : public ::testing::Test {
 protected:
  void start(ProfilerOptions options = {}) {
    // node --perf-basic-prof leaves V8 log files in its working directory: a scratch one.
    std::string dir = ::testing::TempDir() + "/sonde-cpu-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    scratch_ = dir;
    ASSERT_EQ(chdir(scratch_.c_str()), 0);
    options.frequency_hz = 99;
    options.node_name = "test-node";
    options.drain_interval = milliseconds(500);
    auto p = CpuProfiler::start(options);
    ASSERT_TRUE(p.ok()) << p.error().message();
    profiler_ = std::move(p).value();
    auto s = MetricsServer::start("127.0.0.1:0");
    ASSERT_TRUE(s.ok()) << s.error().message();
    server_ = std::move(s).value();
    server_->add([this] { return profiler_->metrics(); });
    server_->add_route(CpuProfiler::kRoute, [this](const HttpRequest& r) {
      return profiler_->handle_profile_request(r);
    });
  }

  // The served profile of the next `seconds`, decoded; also written to a file for pprof.
  Decoded profile(const std::string& query, std::string* file = nullptr) {
    HttpResult r = http_get(server_->port(), std::string(CpuProfiler::kRoute) + "?" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    Decoded d;
    std::string raw = gunzip(r.body);
    EXPECT_FALSE(raw.empty()) << "not gzip";
    EXPECT_TRUE(d.p.ParseFromString(raw));
    if (file) {
      *file = scratch_ + "/profile.pb.gz";
      std::ofstream(*file, std::ios::binary) << r.body;
    }
    return d;
  }

  // The hot-function check shared by the workloads: >= 90% of the process's samples hold the
  // function, under its exact name; go tool pprof reads the served file and names it too.
  void expect_hot(ChildProcess& child, const std::string& pod, const std::string& function,
                  bool exact) {
    ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
    ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", pod, "main"}).ok());
    std::this_thread::sleep_for(milliseconds(500));  // let JITs compile the hot code
    std::string file;
    double cpu0 = cpu_seconds(child.pid());
    Decoded d = profile("seconds=3&namespace=test&pod=" + pod, &file);
    double cpu = cpu_seconds(child.pid()) - cpu0;
    int64_t total = d.total();
    int64_t hot = d.with(function, exact);
    std::printf("%s: %lld of %lld samples in %s; %.2f s of CPU used (%.0f samples at 99 Hz)\n",
                pod.c_str(), static_cast<long long>(hot), static_cast<long long>(total),
                function.c_str(), cpu, cpu * 99);
    // The samples account for the CPU time the kernel says the process used (the machine may
    // be shared, so that is not 3 s).
    EXPECT_GT(total, 20);
    EXPECT_GT(static_cast<double>(total), 0.6 * cpu * 99);
    EXPECT_LT(static_cast<double>(total), 1.4 * cpu * 99 + 5);
    EXPECT_GE(hot * 10, total * 9);
    for (const auto& s : d.p.sample()) {
      for (const auto& l : s.label()) {
        if (d.str(l.key()) == "pid") {
          EXPECT_EQ(l.num(), child.pid());
        }
      }
    }
    EXPECT_EQ(d.str(d.p.period_type().type()), "cpu");
    EXPECT_EQ(d.p.period(), 1'000'000'000 / 99);

    std::string top = command_output(std::string(SONDE_GO) + " tool pprof -top " + file + " 2>&1");
    EXPECT_NE(top.find(function), std::string::npos) << top;
    std::remove(file.c_str());

    std::string metrics = http_get(server_->port(), "/metrics").body;
    EXPECT_NE(metrics.find("container_cpu_profile_samples_total{namespace=\"test\",pod=\"" + pod +
                           "\",container=\"main\",node=\"test-node\"}"),
              std::string::npos)
        << metrics;
    EXPECT_NE(metrics.find("sonde_cpu_profile_dropped_samples_total"), std::string::npos);
  }

  void TearDown() override {
    if (scratch_.empty()) return;
    ASSERT_EQ(chdir("/"), 0);
    std::filesystem::remove_all(scratch_);
  }

  std::string scratch_;
  ::sonde::testing::ManualClock clock_;  // before the profiler that may read it
  std::unique_ptr<CpuProfiler> profiler_;
  std::unique_ptr<MetricsServer> server_;  // after profiler_: stops serving first
};

TEST_F(CpuProfilerTest, CFunction) {
  start();
  ChildProcess child({SONDE_HOT_C});
  expect_hot(child, "c", "sonde_hot_c_function", true);
}

// The node's frequency follows the policies (CpuFeature): changed while running, the samples
// of a busy process follow the CPU time it used at the new rate, and profiles say which.
TEST_F(CpuProfilerTest, FrequencyChangesWhileRunning) {
  start();
  ChildProcess child({SONDE_HOT_C});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "c", "main"}).ok());
  for (uint32_t hz : {19u, 299u}) {
    ASSERT_TRUE(profiler_->set_frequency(hz).ok());
    EXPECT_EQ(profiler_->frequency_hz(), hz);
    double cpu0 = cpu_seconds(child.pid());
    Decoded d = profile("seconds=3&namespace=test&pod=c");
    double cpu = cpu_seconds(child.pid()) - cpu0;
    auto total = static_cast<double>(d.total());
    std::printf("%u Hz: %.0f samples for %.2f s of CPU (%.0f expected)\n", hz, total, cpu,
                cpu * hz);
    EXPECT_GT(total, 0.6 * cpu * hz - 5);
    EXPECT_LT(total, 1.4 * cpu * hz + 5);
    EXPECT_EQ(d.p.period(), 1'000'000'000 / hz);
  }
  EXPECT_FALSE(profiler_->set_frequency(0).ok());
  EXPECT_FALSE(profiler_->set_frequency(1000).ok());
  EXPECT_EQ(profiler_->frequency_hz(), 299u);
}

TEST_F(CpuProfilerTest, GoFunction) {
  start();
  ChildProcess child({SONDE_HOT_GO});
  expect_hot(child, "go", "main.hotGoFunction", true);
}

TEST_F(CpuProfilerTest, StrippedGoFunction) {
  start();
  ChildProcess child({SONDE_HOT_GO_STRIPPED});
  expect_hot(child, "go-stripped", "main.hotGoFunction", true);
}

TEST_F(CpuProfilerTest, NodeJsJitFunction) {
  start();
  ChildProcess child({"/usr/bin/node", "--perf-basic-prof", SONDE_CPU_TEST_DIR "/hot.js"});
  // JIT names come from the perf map, e.g. "JS:*hotJsFunction /path/hot.js:3:23".
  expect_hot(child, "node", "hotJsFunction", false);
}

TEST_F(CpuProfilerTest, FoldedFormat) {
  start();
  ChildProcess child({SONDE_HOT_C});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "c", "main"}).ok());
  HttpResult r = http_get(server_->port(),
                          std::string(CpuProfiler::kRoute) + "?seconds=3&pod=c&format=folded");
  ASSERT_EQ(r.status, 200);
  // "...;main;sonde_hot_c_function N" lines: root first, the hot function as the leaf (kernel
  // frames of an interrupt, when there are any, come after it). A sample whose stacks the kernel
  // could not take reads "[no stack]": rare, but seen once in 292 samples with 32 of them on a
  // loaded CI machine, no drop counted; it says nothing about the format, so the share of the hot
  // function is taken over the samples that have a stack.
  long hot = 0, total = 0, no_stack = 0;
  std::istringstream in(r.body);
  for (std::string line; std::getline(in, line);) {
    size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    long n = std::stol(line.substr(sp + 1));
    total += n;
    std::string stack = line.substr(0, sp) + ";";
    if (stack == "[no stack];") no_stack += n;
    if (stack.find(";main;sonde_hot_c_function;") != std::string::npos) hot += n;
  }
  stacks::CpuSampler::Drops d = profiler_->stats().drops;
  std::string why = r.body + "drops: samples " + std::to_string(d.samples) + ", stacks " +
                    std::to_string(d.stacks) + ", user stacks missing " +
                    std::to_string(d.user_stacks);
  EXPECT_GE(total - no_stack, 10) << why;
  EXPECT_LE(no_stack * 4, total) << why;
  EXPECT_GE(hot * 10, (total - no_stack) * 9) << why;
}

TEST_F(CpuProfilerTest, RejectsBadRequests) {
  start();
  EXPECT_EQ(http_get(server_->port(), std::string(CpuProfiler::kRoute) + "?seconds=0").status, 400);
  EXPECT_EQ(http_get(server_->port(), std::string(CpuProfiler::kRoute) + "?seconds=1&x=1").status,
            400);
  // No Node.js probes loaded in this profiler: blocked=true cannot be answered.
  EXPECT_EQ(http_get(server_->port(), std::string(CpuProfiler::kRoute) + "?seconds=1&blocked=true")
                .status,
            400);
  EXPECT_EQ(http_get(server_->port(), "/nothing").status, 404);
}

// Node.js loop tracking for pid the way the agent does it: where the wait hook is per process
// (libc uprobes, the default without BPF trampolines) its C library is hooked first. The hooks
// are returned to keep them attached (null for the kernel-wide hooks).
std::unique_ptr<LibcWaitHooks> track_loop(LoopProbes& probes, symbols::ProbeTargetCache& cache,
                                          pid_t pid) {
  std::unique_ptr<LibcWaitHooks> hooks;
  if (probes.source() == LoopProbes::WaitSource::kLibcUprobes) {
    hooks = std::make_unique<LibcWaitHooks>(probes, cache);
    auto hooked = hooks->hook(pid, 0);
    EXPECT_TRUE(hooked.ok()) << hooked.error().message();
  }
  LoopProbes::Start track;
  track.any_epfd = true;  // no symbols needed: every main-thread epoll wait is the loop's
  EXPECT_TRUE(probes.track(pid, track).ok());
  return hooks;
}

TEST_F(CpuProfilerTest, BlockedNodeJsLoop) {
  auto probes = LoopProbes::load();
  ASSERT_TRUE(probes.ok()) << probes.error().message();
  ProfilerOptions options;
  options.nodejs_loops_map_fd = (*probes)->loops_map_fd();
  start(options);
  ASSERT_TRUE(profiler_->tracks_nodejs_loops());

  ChildProcess child({"/usr/bin/node", "--perf-basic-prof", SONDE_CPU_TEST_DIR "/blocked.js"});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  symbols::ProbeTargetCache cache;
  auto hooks = track_loop(**probes, cache, child.pid());
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "blocked", "main"}).ok());
  std::this_thread::sleep_for(milliseconds(1000));

  // The same window twice, at once: blocked samples only, and all of them.
  Decoded all;
  std::thread other([&] { all = profile("seconds=5&pod=blocked"); });
  Decoded blocked = profile("seconds=5&pod=blocked&blocked=true");
  other.join();
  std::printf("blocked: %lld samples, blockingHandler in %lld, workerSpin in %lld\n",
              static_cast<long long>(blocked.total()),
              static_cast<long long>(blocked.with("blockingHandler")),
              static_cast<long long>(blocked.with("workerSpin")));
  std::printf("all: %lld samples, blockingHandler in %lld, workerSpin in %lld\n",
              static_cast<long long>(all.total()),
              static_cast<long long>(all.with("blockingHandler")),
              static_cast<long long>(all.with("workerSpin")));
  EXPECT_GE(blocked.total(), 10);
  EXPECT_LE(blocked.total(), all.total());
  // blockingHandler runs only while the loop is blocked: (nearly) all its samples are marked.
  EXPECT_GE(blocked.with("blockingHandler") * 10, all.with("blockingHandler") * 8);
  EXPECT_NE(blocked.top_jit_function().find("blockingHandler"), std::string::npos)
      << blocked.top_jit_function();
  // The worker's spinning never blocks the main loop: absent when blocked, present otherwise.
  EXPECT_EQ(blocked.with("workerSpin"), 0);
  EXPECT_GE(all.with("workerSpin"), 10);
  for (const auto& s : blocked.p.sample()) {
    bool marked = false;
    for (const auto& l : s.label()) marked |= blocked.str(l.key()) == "blocked";
    EXPECT_TRUE(marked);
  }
}

// A plain node (no flag): the blocked-loop profile names the JavaScript function that blocks
// it, with its file and line (truth: the script's source), in pprof, in folded stacks and for
// `go tool pprof -list`; the share of JavaScript frames named is a metric, whose series leave
// /metrics (with the samples counter's) once the container's selection is released.
TEST_F(CpuProfilerTest, BlockedNodeJsLoopNamedWithoutPerfMap) {
  auto probes = LoopProbes::load();
  ASSERT_TRUE(probes.ok()) << probes.error().message();
  ProfilerOptions options;
  options.nodejs_loops_map_fd = (*probes)->loops_map_fd();
  options.clock = &clock_;  // series_grace: the default 5 min, on this clock
  start(options);

  const std::string script = SONDE_CPU_TEST_DIR "/js_burn.js";
  int64_t truth = 0;
  {
    std::ifstream in(script);
    int64_t n = 0;
    for (std::string line; std::getline(in, line) && truth == 0;) {
      ++n;
      if (line.find("function burnBlocking(") != std::string::npos) truth = n;
    }
  }
  ASSERT_GT(truth, 0);
  ChildProcess child({"/usr/bin/node", script});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  symbols::ProbeTargetCache cache;
  auto hooks = track_loop(**probes, cache, child.pid());
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "plain", "main"}).ok());
  std::this_thread::sleep_for(milliseconds(1500));  // one drain learns the process

  std::string file;
  Decoded d = profile("seconds=4&pod=plain&blocked=true", &file);
  int64_t named = 0;
  for (const auto& s : d.p.sample()) {
    bool hit = false;
    for (uint64_t id : s.location_id()) {
      for (const auto& line : d.location(id).line()) {
        const auto& f = d.p.function(static_cast<int>(line.function_id() - 1));
        if (d.str(f.name()) == "burnBlocking" && d.str(f.filename()) == script &&
            line.line() == truth) {
          hit = true;
        }
      }
    }
    if (hit) named += s.value(0);
  }
  std::printf("plain node, blocked: %lld of %lld samples in burnBlocking at %s:%lld\n",
              static_cast<long long>(named), static_cast<long long>(d.total()), script.c_str(),
              static_cast<long long>(truth));
  EXPECT_GE(d.total(), 50);
  EXPECT_GE(named * 10, d.total() * 8);

  std::string list =
      command_output(std::string(SONDE_GO) + " tool pprof -list burnBlocking " + file + " 2>&1");
  EXPECT_NE(list.find("ROUTINE ======================== burnBlocking in " + script),
            std::string::npos)
      << list;
  std::remove(file.c_str());

  HttpResult folded = http_get(
      server_->port(), std::string(CpuProfiler::kRoute) + "?seconds=2&pod=plain&format=folded");
  EXPECT_EQ(folded.status, 200);
  EXPECT_NE(folded.body.find(";burnBlocking"), std::string::npos) << folded.body;

  const std::string metrics = http_get(server_->port(), "/metrics").body;
  EXPECT_NE(metrics.find("container_cpu_profile_js_frames_total{namespace=\"test\",pod=\"plain\","
                         "container=\"main\",node=\"test-node\",result=\"named\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("sonde_cpu_profile_nodejs_processes{js_frames=\"supported\","
                         "node=\"test-node\"} 1"),
            std::string::npos)
      << metrics;
  const CpuProfiler::Stats stats = profiler_->stats();
  std::printf("JavaScript name caches: %zu bytes for one node process\n",
              stats.js_name_cache_bytes);
  EXPECT_GT(stats.js_name_cache_bytes, 0u);
  EXPECT_EQ(stats.js_name_cache_clears, 0u);
  EXPECT_NE(metrics.find("sonde_cpu_profile_js_name_cache_bytes{node=\"test-node\"} " +
                         std::to_string(stats.js_name_cache_bytes)),
            std::string::npos)
      << metrics;

  ASSERT_TRUE(profiler_->release_pid(child.pid()).ok());
  // The pod's series stay through the grace period after the release, and leave at the first
  // drain after it.
  auto next_drain = [&] {
    const uint64_t drains = profiler_->stats().drains;
    for (int i = 0; i < 100 && profiler_->stats().drains <= drains; ++i) {
      std::this_thread::sleep_for(milliseconds(50));
    }
    return http_get(server_->port(), "/metrics").body;
  };
  clock_.advance(std::chrono::minutes(5) - std::chrono::seconds(1));
  const std::string within = next_drain();
  EXPECT_NE(within.find("pod=\"plain\""), std::string::npos) << within;
  clock_.advance(std::chrono::seconds(1));
  const std::string after = next_drain();
  EXPECT_EQ(after.find("pod=\"plain\""), std::string::npos) << after;
}

// With a name-cache budget too small for one entry, every frame is named from the heap, and
// named the same: the budget costs reads, never names.
TEST_F(CpuProfilerTest, ANameCacheBudgetTooSmallForOneEntryKeepsTheNames) {
  ProfilerOptions options;
  options.js_name_cache_bytes = 1;
  start(options);
  ChildProcess child({"/usr/bin/node", SONDE_CPU_TEST_DIR "/js_burn.js"});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "tight", "main"}).ok());
  std::this_thread::sleep_for(milliseconds(1500));  // one drain learns the process
  Decoded d = profile("seconds=3&pod=tight");
  const int64_t named = d.with("burnBlocking", true);
  const CpuProfiler::Stats stats = profiler_->stats();
  std::printf("budget 1 byte: %lld of %lld samples in burnBlocking; caches emptied %llu times\n",
              static_cast<long long>(named), static_cast<long long>(d.total()),
              static_cast<unsigned long long>(stats.js_name_cache_clears));
  EXPECT_GE(d.total(), 50);
  EXPECT_GE(named * 10, d.total() * 8);
  EXPECT_GT(stats.js_name_cache_clears, 0u);
  EXPECT_EQ(stats.js_name_cache_bytes, 0u);
}

// Naming JavaScript frames only reads node (bpf_probe_read_user in the sampler,
// process_vm_readv on the node): a node whose frames are walked and named while it allocates
// (GC moving objects) exits 0 with the same output as a run nobody watched.
TEST_F(CpuProfilerTest, ANodeWhoseFramesAreNamedRunsAsItWouldUnwatched) {
  const std::string script = SONDE_CPU_TEST_DIR "/js_burn.js";
  const std::vector<std::string> argv = {"/usr/bin/node", script, "churn", "16"};
  std::string unwatched;
  {
    ChildProcess alone(argv);
    ASSERT_TRUE(alone.wait_for_line("done ", milliseconds(30000)));
    unwatched = alone.last_line();
    const int status = alone.wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }

  start();
  ChildProcess child(argv);
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "watched", "main"}).ok());
  // 16 rounds of 250 ms: the profile covers most of the run, the first drain learns the process
  // and tells the sampler to walk its V8 frames.
  Decoded d = profile("seconds=3&pod=watched");
  EXPECT_GE(d.with("burnBlocking", true), 10) << "the V8 frames were not named: not a test of it";
  ASSERT_TRUE(child.wait_for_line("done ", milliseconds(30000)));
  EXPECT_EQ(child.last_line(), unwatched);
  const int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A Pyroscope ingest endpoint stand-in: accepts POST /prefix/ingest with a multipart body,
// stores the `profile` field as N.pprof and the query parameters as N.json in the given folder.
constexpr const char* kReceiver = R"PY(
import email.parser, http.server, json, os, sys, urllib.parse
out = sys.argv[1]
class Handler(http.server.BaseHTTPRequestHandler):
    count = 0
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        url = urllib.parse.urlsplit(self.path)
        head = b'Content-Type: ' + self.headers['Content-Type'].encode() + b'\r\n\r\n'
        message = email.parser.BytesParser().parsebytes(head + body)
        profile = None
        if message.is_multipart():
            for part in message.get_payload():
                if part.get_param('name', header='content-disposition') == 'profile':
                    profile = part.get_payload(decode=True)
        ok = url.path == '/prefix/ingest' and profile is not None
        if ok:
            Handler.count += 1
            base = os.path.join(out, str(Handler.count))
            with open(base + '.pprof', 'wb') as f:
                f.write(profile)
            with open(base + '.json.tmp', 'w') as f:
                json.dump(dict(urllib.parse.parse_qsl(url.query)), f)
            os.rename(base + '.json.tmp', base + '.json')
        self.send_response(200 if ok else 400)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
print('port', server.server_address[1], flush=True)
server.serve_forever()
)PY";

TEST_F(CpuProfilerTest, PushesToPyroscope) {
  start();
  std::string script = scratch_ + "/receiver.py";
  std::ofstream(script) << kReceiver;
  ChildProcess receiver({"/usr/bin/python3", script, scratch_});
  ASSERT_TRUE(receiver.wait_for_line("port ", milliseconds(10000)));
  int port = std::stoi(receiver.last_line().substr(5));

  ChildProcess child({SONDE_HOT_C});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  ASSERT_TRUE(profiler_->select_pid(child.pid(), {"test", "push", "main"}).ok());
  PushOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(port) + "/prefix/";
  options.interval = milliseconds(2000);
  options.node_name = "test-node";
  auto pusher = PyroscopePusher::start(*profiler_, options);
  ASSERT_TRUE(pusher.ok()) << pusher.error().message();

  std::string first = scratch_ + "/1.json";
  for (int i = 0; i < 300 && !std::filesystem::exists(first); ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(std::filesystem::exists(first)) << "nothing pushed";
  nlohmann::json query = nlohmann::json::parse(std::ifstream(first));
  EXPECT_EQ(query["name"], "sonde.cpu{namespace=test,pod=push,container=main,node=test-node}");
  EXPECT_EQ(query["format"], "pprof");
  EXPECT_EQ(query["sampleRate"], "99");
  long from = std::stol(query["from"].get<std::string>());
  long until = std::stol(query["until"].get<std::string>());
  EXPECT_GE(until, from + 1);
  EXPECT_LE(until, static_cast<long>(time(nullptr)));

  std::ifstream in(scratch_ + "/1.pprof", std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Decoded d;
  ASSERT_TRUE(d.p.ParseFromString(gunzip(gz)));
  std::printf("pushed: %lld samples, %lld in sonde_hot_c_function\n",
              static_cast<long long>(d.total()),
              static_cast<long long>(d.with("sonde_hot_c_function", true)));
  EXPECT_GT(d.total(), 5);
  EXPECT_GE(d.with("sonde_hot_c_function", true) * 10, d.total() * 9);
  // The receiver stores the profile before it answers: the pusher counts it a moment later.
  PyroscopePusher::Stats stats = (*pusher)->stats();
  for (int i = 0; i < 100 && stats.pushed == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    stats = (*pusher)->stats();
  }
  EXPECT_GE(stats.pushed, 1u);
  EXPECT_EQ(stats.failed, 0u);
}

TEST(PyroscopeNameTest, LeavesOutEmptyLabelsAndReplacesDelimiters) {
  EXPECT_EQ(pyroscope_name("app", {"ns", "p{1}", ""}, "n=1"),
            "app.cpu{namespace=ns,pod=p_1_,node=n_1}");
  EXPECT_EQ(pyroscope_name("app", {}, ""), "app.cpu{}");
}

// One tenant's policy asks 999 Hz of a node capped at 99 Hz: the node samples at 99 Hz (the
// profile's period, and its samples against the CPU time the process used), the process's
// outcome and /metrics say it is capped, and a lower ask is followed once that process is gone.
TEST(CpuFeatureCap, APolicyAskingMoreIsSampledAtTheCapAndSaysSo) {
  ProfilerOptions o;
  o.node_name = "cap-node";
  auto started = CpuFeature::start(o, /*required=*/true, {}, /*by_cgroup=*/false, 99);
  ASSERT_TRUE(started.ok()) << started.error().message();
  CpuFeature& feature = **started;
  auto server = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.error().message();
  (*server)->add([&] {
    std::vector<prometheus::MetricFamily> out;
    feature.collect(out);
    return out;
  });
  feature.add_routes(**server);
  ChildProcess greedy({SONDE_HOT_C});
  ChildProcess modest({SONDE_HOT_C});
  ASSERT_TRUE(greedy.wait_for_line("ready", milliseconds(10000)));
  ASSERT_TRUE(modest.wait_for_line("ready", milliseconds(10000)));
  auto selection = [](uint32_t hz, const std::string& pod) {
    Selection s;
    s.labels = {"test", pod, "main"};
    s.instrumentations[Instrumentation::kCpu] =
        InstrumentationParams::make(CpuParams{.frequency_hz = hz});
    return s;
  };
  auto metric = [&](const std::string& series) {
    std::string body = http_get((*server)->port(), "/metrics").body;
    size_t at = body.find("\n" + series + " ");
    return at == std::string::npos ? std::string("none")
                                   : body.substr(at + series.size() + 2,
                                                 body.find('\n', at + 1) - at - series.size() - 2);
  };

  auto r = feature.select(ProcessInfo{.pid = greedy.pid()}, selection(999, "greedy"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, ProcessOutcome::State::kInstrumented);
  EXPECT_NE(r->message.find("sampled at 99 Hz, not the 999 Hz its policy asks"), std::string::npos)
      << r->message;
  EXPECT_EQ(feature.frequency_hz(), 99u);
  EXPECT_EQ(metric("sonde_cpu_profile_frequency_hertz{node=\"cap-node\"}"), "99");
  EXPECT_EQ(metric("sonde_cpu_profile_max_frequency_hertz{node=\"cap-node\"}"), "99");
  EXPECT_EQ(metric("sonde_cpu_profile_capped_processes{node=\"cap-node\"}"), "1");

  double cpu0 = cpu_seconds(greedy.pid());
  HttpResult served = http_get(
      (*server)->port(), std::string(CpuProfiler::kRoute) + "?seconds=3&namespace=test&pod=greedy");
  double cpu = cpu_seconds(greedy.pid()) - cpu0;
  ASSERT_EQ(served.status, 200) << served.body;
  Decoded d;
  ASSERT_TRUE(d.p.ParseFromString(gunzip(served.body)));
  auto total = static_cast<double>(d.total());
  std::printf(
      "capped at 99 Hz (999 asked): %.0f samples for %.2f s of CPU (%.0f at 99 Hz, %.0f "
      "at 999 Hz)\n",
      total, cpu, cpu * 99, cpu * 999);
  EXPECT_EQ(d.p.period(), 1'000'000'000 / 99);
  EXPECT_GT(total, 0.6 * cpu * 99 - 5);
  EXPECT_LT(total, 1.4 * cpu * 99 + 5);

  auto within = feature.select(ProcessInfo{.pid = modest.pid()}, selection(49, "modest"));
  ASSERT_TRUE(within);
  EXPECT_EQ(within->message, "") << "a policy within the cap is not reported capped";
  EXPECT_EQ(feature.frequency_hz(), 99u);
  feature.release(greedy.pid(), 0);
  EXPECT_EQ(feature.frequency_hz(), 49u) << "the remaining policy's rate";
  EXPECT_EQ(metric("sonde_cpu_profile_capped_processes{node=\"cap-node\"}"), "0");
  feature.release(modest.pid(), 0);
  EXPECT_EQ(feature.frequency_hz(), 19u) << "the configured rate when nothing asks";
}

}  // namespace
}  // namespace sonde::agent::cpu
