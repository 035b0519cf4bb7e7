// The Go TLS probes on the real kernel with the real Go workload (e2e/workloads/gotls): a
// process is counted in the kernel from its first call without being tracked, and the cgroup
// filter counts only processes of admitted cgroups, named from /proc as the kernel names them
// (cgroup v2; the test makes its own cgroups).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/discovery/candidate.h"
#include "agent/gotls/tls_monitor.h"
#include "agent/gotls/tls_probes.h"
#include "agent/kernel/uprobe_links.h"
#include "agent/runtime/fd_budget.h"
#include "agent/tests/cgroup2_root.h"
#include "agent/tests/child_process.h"
#include "common/clock.h"

namespace sonde::agent {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;

using testing::cgroup2_root;

// Requests counted in the kernel for tgid, 0 when it is not counted at all.
uint64_t requests_of(const TlsProbes& probes, pid_t tgid, bool* counted) {
  auto all = probes.counts();
  auto it = all.find(static_cast<uint32_t>(tgid));
  *counted = it != all.end();
  uint64_t n = 0;
  if (*counted) {
    for (const auto& [key, stats] : it->second.requests) n += stats.count;
  }
  return n;
}

// Has `monitor` instrument the running process `pid`, its series labelled container `container`.
void track(TlsMonitor& monitor, const ProcReader& proc, pid_t pid, const std::string& container) {
  auto info = proc.read(pid);
  ASSERT_TRUE(info.ok()) << info.error().message();
  auto candidate = open_candidate(proc, *info, true);
  ASSERT_TRUE(candidate.ok()) << candidate.error().message();
  ASSERT_EQ(monitor.consider(*candidate, {"", "", container}), TlsMonitor::Outcome::kTracked);
}

class TlsProbesBpfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
    if (std::string(SONDE_GOTLS_WORKLOAD).empty()) GTEST_SKIP() << "no Go toolchain";
    auto p = TlsProbes::load();
    ASSERT_TRUE(p.ok()) << p.error().message();
    probes_ = std::move(*p);
  }

  // Runs `gotls client PORT 200 200` inside cgroup dir (the cgroup v2 path), waits for it.
  pid_t run_client(const std::string& cgroup_dir, int port) {
    ChildProcess client({"/bin/sh", "-c",
                         "echo $$ > '" + cgroup_dir + "/cgroup.procs' && exec '" +
                             std::string(SONDE_GOTLS_WORKLOAD) + "' client " +
                             std::to_string(port) + " 200 200"});
    EXPECT_TRUE(client.wait_for_line("done 2", 20s)) << "client did not finish";
    int status = client.wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return client.pid();
  }

  // Probes whose processes may each fill the whole HTTP/2 ring buffer (no share of it), for the
  // tests of a full ring buffer.
  static std::unique_ptr<TlsProbes> probes_with_the_whole_ring_buffer_shared() {
    TlsProbes::Shares shares = TlsProbes::default_shares();
    shares[SONDE_GOTLS_SHARED_H2_EVENTS] = SONDE_GOTLS_H2_RINGBUF_BYTES;
    auto p = TlsProbes::load(false, uprobe_link_support().kind, true, shares);
    EXPECT_TRUE(p.ok()) << p.error().message();
    return p.ok() ? std::move(*p) : nullptr;
  }

  std::unique_ptr<TlsProbes> probes_;
};

TEST_F(TlsProbesBpfTest, CountsFromTheFirstCallAndHonoursTheCgroupFilter) {
  const std::string root = cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string base = root + "/sonde-gotls-test-" + std::to_string(getpid());
  const std::string selected = base + "-selected", other = base + "-other";
  struct Cleanup {
    std::vector<std::string> dirs;
    std::string root;
    ~Cleanup() {
      // Processes left in the test cgroups go back to the root before they are removed.
      for (const auto& dir : dirs) {
        std::ifstream procs(dir + "/cgroup.procs");
        for (std::string pid; std::getline(procs, pid);) {
          std::ofstream(root + "/cgroup.procs") << pid;
        }
        rmdir(dir.c_str());
      }
    }
  } cleanup{{selected, other}, root};
  ASSERT_TRUE(std::filesystem::create_directory(selected)) << selected;
  ASSERT_TRUE(std::filesystem::create_directory(other)) << other;

  // The server is tracked, which attaches the probes to the file all clients run.
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const int port = std::stoi(server.last_line().substr(std::string("listening ").size()));
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  ProcReader proc;
  TlsMonitor monitor(*probes_, cache, uprobes, proc);
  auto info = proc.read(server.pid());
  ASSERT_TRUE(info.ok()) << info.error().message();
  auto candidate = open_candidate(proc, *info, true);
  ASSERT_TRUE(candidate.ok()) << candidate.error().message();
  ASSERT_EQ(monitor.consider(*candidate, {"", "", "server"}), TlsMonitor::Outcome::kTracked);
  auto verdicts = monitor.verdicts();
  ASSERT_EQ(verdicts.size(), 1u);
  ASSERT_TRUE(verdicts[0].instrumentable) << verdicts[0].reason;
  EXPECT_EQ(verdicts[0].entry_probe, "emulated-jump");

  // A second tracer (another agent) decoding the file while these probes are attached must
  // see the instructions, not the breakpoints the kernel wrote into every mapping of it.
  {
    auto other_probes = TlsProbes::load();
    ASSERT_TRUE(other_probes.ok()) << other_probes.error().message();
    symbols::ProbeTargetCache other_cache;
    SharedUprobes other_uprobes;
    TlsMonitor other_monitor(**other_probes, other_cache, other_uprobes, proc);
    auto again = open_candidate(proc, *info, true);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(other_monitor.consider(*again, {"", "", "server"}), TlsMonitor::Outcome::kTracked);
    auto v = other_monitor.verdicts();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].instrumentable) << v[0].reason;
    EXPECT_EQ(v[0].entry_probe, "emulated-jump");
    other_monitor.exited(server.pid());
  }

  // No filter: a client of the instrumented file is counted from its first call without being
  // tracked, and its counts are discarded when it exits.
  bool counted = false;
  pid_t unfiltered = run_client(root, port);
  EXPECT_EQ(requests_of(*probes_, unfiltered, &counted), 2u);
  EXPECT_TRUE(counted);
  EXPECT_EQ(requests_of(*probes_, server.pid(), &counted), 2u);
  monitor.exited(unfiltered);
  EXPECT_FALSE(probes_->counting(static_cast<uint32_t>(unfiltered)));
  EXPECT_EQ(monitor.discarded_processes(), 1u);

  // Filter on, with one admitted process (a selected container's) in `selected`: the kernel
  // names its cgroup (the task iterator), which must be the inode of the cgroup's directory and
  // what bpf_get_current_cgroup_id() says in the client below, or it would not be counted.
  monitor.filter_by_cgroup();
  ChildProcess member(
      {"/bin/sh", "-c", "echo $$ > '" + selected + "/cgroup.procs' && echo in && exec sleep 1000"});
  ASSERT_TRUE(member.wait_for_line("in", 20s));
  struct stat st {};
  ASSERT_EQ(stat(selected.c_str(), &st), 0);
  auto member_info = proc.read(member.pid());
  ASSERT_TRUE(member_info.ok());
  auto member_id = probes_->cgroup_of(member.pid(), member_info->start_time);
  ASSERT_TRUE(member_id.ok()) << member_id.error().message();
  EXPECT_EQ(*member_id, st.st_ino);
  auto stale = probes_->cgroup_of(member.pid(), member_info->start_time + 1);
  ASSERT_FALSE(stale.ok()) << "another start time is another process";
  EXPECT_TRUE(is_gone(stale.error())) << stale.error().message();
  monitor.admit(*member_info, {"ns", "pod", "member"});
  ASSERT_TRUE(monitor.filtering_by_cgroup());

  // A client in the admitted cgroup is counted from its first call (never tracked); one in
  // another cgroup is not counted at all: no map entry.
  pid_t in_selected = run_client(selected, port);
  EXPECT_EQ(requests_of(*probes_, in_selected, &counted), 2u);
  EXPECT_TRUE(counted);
  pid_t in_other = run_client(other, port);
  EXPECT_EQ(requests_of(*probes_, in_other, &counted), 0u);
  EXPECT_FALSE(counted);
  pid_t in_root = run_client(root, port);
  EXPECT_EQ(requests_of(*probes_, in_root, &counted), 0u);
  EXPECT_FALSE(counted);

  // The admitted process exits: its cgroup is not counted any more.
  monitor.exited(member.pid());
  pid_t after = run_client(selected, port);
  EXPECT_EQ(requests_of(*probes_, after, &counted), 0u);
  EXPECT_FALSE(counted);
  for (const auto& [map, n] : monitor.kernel_map_full()) EXPECT_EQ(n, 0u) << map.first;
}

// On a kernel with uprobe_multi links (6.6+) a binary costs one descriptor per program (write,
// read, the RETs of read) instead of two per site, and counts exactly what single links count:
// both kinds run here against one server and its clients, with the descriptors the agent
// (this process) holds counted in /proc/self/fd before and after the binary is attached.
TEST_F(TlsProbesBpfTest, UprobeMultiLinksCountExactlyWithOneDescriptorPerProgram) {
  if (uprobe_link_support().kind != UprobeLinkKind::kMulti) {
    GTEST_SKIP() << "no uprobe_multi links on this kernel: " << uprobe_link_support().why;
  }
  const std::string root = cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const int port = std::stoi(server.last_line().substr(std::string("listening ").size()));
  ProcReader proc;
  ProcessDescriptors fds;
  for (UprobeLinkKind kind : {UprobeLinkKind::kMulti, UprobeLinkKind::kSingle}) {
    SCOPED_TRACE(uprobe_link_kind_name(kind));
    auto probes = TlsProbes::load(/*perform_ret=*/false, kind);
    ASSERT_TRUE(probes.ok()) << probes.error().message();
    ASSERT_EQ((*probes)->links(), kind);
    symbols::ProbeTargetCache cache;
    SharedUprobes uprobes;
    TlsMonitor monitor(**probes, cache, uprobes, proc);
    auto info = proc.read(server.pid());
    ASSERT_TRUE(info.ok()) << info.error().message();
    auto candidate = open_candidate(proc, *info, true);
    ASSERT_TRUE(candidate.ok()) << candidate.error().message();
    auto before = fds.open();
    ASSERT_TRUE(before.ok()) << before.error().message();
    // A limit high enough to leave it in, to learn the binary's sites (policy_uprobes()).
    ASSERT_EQ(monitor.consider(*candidate, {"", "", "server"}, {{"test", 1000}}),
              TlsMonitor::Outcome::kTracked);
    auto after = fds.open();
    ASSERT_TRUE(after.ok()) << after.error().message();
    const size_t sites = monitor.policy_uprobes().at("test");
    const size_t held = *after - *before;
    std::cout << "fds per instrumented binary, " << uprobe_link_kind_name(kind)
              << " links: " << held << " (" << sites << " sites, " << uprobes.size()
              << " programs)\n";
    ASSERT_EQ(uprobes.size(), 3u);
    EXPECT_EQ(held, kind == UprobeLinkKind::kMulti ? 3u : 2 * sites);
    EXPECT_EQ(held, (*probes)->link_fds(1) * (kind == UprobeLinkKind::kMulti ? 3 : sites));

    bool counted = false;
    const uint64_t server_before = requests_of(**probes, server.pid(), &counted);
    pid_t client = run_client(root, port);
    EXPECT_EQ(requests_of(**probes, client, &counted), 2u);
    EXPECT_TRUE(counted);
    EXPECT_EQ(requests_of(**probes, server.pid(), &counted) - server_before, 2u);
    monitor.exited(client);
    monitor.exited(server.pid());
    uprobes.flush();
    auto detached = fds.open();
    ASSERT_TRUE(detached.ok());
    EXPECT_EQ(*detached, *before) << "every link closed";
  }
}

// HTTP/2 over the real kernel: Go's HTTP/2 client and server (ALPN h2), 50 concurrent streams
// on one connection, counted by status class on both sides from the frames the kernel walks.
// The client's exit ends the connection: the server's Read of it fails, and the kernel frees the
// server's state of it then (its framing states, its Read), not at the server's exit; the
// client's connection is forgotten when the client is taken.
TEST_F(TlsProbesBpfTest, Http2StreamsOfGoClientAndServerCountedExactly) {
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "-h2", "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const int port = std::stoi(server.last_line().substr(std::string("listening ").size()));
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  TlsMonitor monitor(*probes_, cache, uprobes, proc);
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, server.pid(), "server"));

  std::vector<std::string> args = {SONDE_GOTLS_WORKLOAD, "-h2", "streams", std::to_string(port),
                                   "1"};
  for (int i = 0; i < 30; ++i) args.emplace_back("200");
  for (int i = 0; i < 20; ++i) args.emplace_back("404");
  ChildProcess client(args);
  ASSERT_TRUE(client.wait_for_line("done 51", 30s)) << "client did not finish";
  int status = client.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const auto server_tgid = static_cast<uint32_t>(server.pid());
  auto held_by_server = [&] {
    int64_t n = 0;
    const auto counts = probes_->counts();
    if (auto it = counts.find(server_tgid); it != counts.end()) {
      for (int64_t h : it->second.process.held) n += h;
    }
    return n;
  };
  for (auto end = std::chrono::steady_clock::now() + 10s;
       held_by_server() != 0 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(10ms);
  }
  auto all = probes_->counts();
  for (size_t t = 0; t < SONDE_GOTLS_SHARED_COUNT; ++t) {
    EXPECT_EQ(all[server_tgid].process.held[t], 0)
        << gotls_shared_table_name(static_cast<sonde_gotls_shared_table>(t));
  }
  EXPECT_EQ(all[static_cast<uint32_t>(client.pid())].process.held[SONDE_GOTLS_SHARED_H2_STATES], 2)
      << "the client exited without a failed Read: its states wait for take()";
  for (pid_t pid : {client.pid(), server.pid()}) {
    std::map<int, uint64_t> by_class;
    uint64_t prefaces = 0;
    for (const auto& [k, s] : all[static_cast<uint32_t>(pid)].requests) {
      if (k.protocol == SONDE_TLS_HTTP2) {  // the connection, counted by the kernel
        prefaces += s.count;
        continue;
      }
      EXPECT_EQ(k.protocol, SONDE_TLS_HTTP2_STREAM);
      EXPECT_EQ(k.direction, pid == client.pid() ? SONDE_TLS_CLIENT : SONDE_TLS_SERVER);
      by_class[k.status_class] += s.count;
    }
    EXPECT_EQ(by_class[2], 31u) << "30 GETs and the HEAD that opens the connection";
    EXPECT_EQ(by_class[4], 20u);
    EXPECT_EQ(by_class.size(), 2u);
    EXPECT_EQ(prefaces, 1u);
  }
  EXPECT_EQ(probes_->full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u);
  EXPECT_EQ(probes_->http2().stats().followed, 2u);
  EXPECT_EQ(probes_->http2().stats().lost, 0u);
  EXPECT_EQ(probes_->http2().connections(), 1u) << "the server's connection ended";
  probes_->take(static_cast<uint32_t>(client.pid()));
  EXPECT_EQ(probes_->http2().connections(), 0u) << "the client's connection forgotten";
  monitor.exited(server.pid());
}

// Requests still open when their process exits are counted at the exit (tls_probes.h): a Go
// client over HTTP/2 (one connection) and HTTP/1.1 (a connection each) exits 0 with 5 requests
// unanswered (status_class 0, "unknown") and 3 whose status 201 came but not the body (2xx, as
// HTTP/1.x counts a response by its status line), after a HEAD answered 200. Then the server
// is killed with the same requests open on its side.
TEST_F(TlsProbesBpfTest, RequestsOpenWhenTheProcessExitsAreCountedAtTheExit) {
  for (const bool h2 : {true, false}) {
    SCOPED_TRACE(h2 ? "HTTP/2" : "HTTP/1.1");
    std::vector<std::string> server_args = {SONDE_GOTLS_WORKLOAD, "server"};
    if (h2) server_args.insert(server_args.begin() + 1, "-h2");
    ChildProcess server(server_args);
    ASSERT_TRUE(server.wait_for_line("listening", 20s));
    const std::string port = server.last_line().substr(std::string("listening ").size());
    ProcReader proc;
    symbols::ProbeTargetCache cache;
    SharedUprobes uprobes;
    TlsMonitor monitor(*probes_, cache, uprobes, proc);
    ASSERT_NO_FATAL_FAILURE(track(monitor, proc, server.pid(), "server"));

    std::vector<std::string> client_args = {SONDE_GOTLS_WORKLOAD, "abandon", port, "5", "3"};
    if (h2) client_args.insert(client_args.begin() + 1, "-h2");
    ChildProcess client(client_args);
    ASSERT_TRUE(client.wait_for_line("abandoned", 30s)) << "client did not finish";
    const int status = client.wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    const auto client_counts = probes_->take(static_cast<uint32_t>(client.pid()));
    kill(server.pid(), SIGKILL);
    server.wait();
    const auto server_counts = probes_->take(static_cast<uint32_t>(server.pid()));

    for (const auto* counts : {&client_counts, &server_counts}) {
      const bool client_side = counts == &client_counts;
      SCOPED_TRACE(client_side ? "client" : "server");
      std::map<std::pair<int, int>, uint64_t> by;  // (method, status_class) -> requests
      uint64_t unknown_ns = 0;
      for (const auto& [k, s] : counts->requests) {
        if (k.protocol == SONDE_TLS_HTTP2) continue;  // the connection, by its preface
        EXPECT_EQ(k.protocol, h2 ? SONDE_TLS_HTTP2_STREAM : SONDE_TLS_HTTP1);
        EXPECT_EQ(k.direction, client_side ? SONDE_TLS_CLIENT : SONDE_TLS_SERVER);
        by[{k.method, k.status_class}] += s.count;
        if (k.status_class == 0) unknown_ns += s.duration_sum_ns;
      }
      EXPECT_EQ((by[{SONDE_HTTP_HEAD, 2}]), 1u);
      EXPECT_EQ((by[{SONDE_HTTP_GET, 0}]), 5u) << "unanswered: unknown";
      EXPECT_EQ((by[{SONDE_HTTP_GET, 2}]), 3u) << "the status came, the body did not";
      EXPECT_EQ(by.size(), 3u);
      // Each unanswered request was open for the client's 300 ms wait at least, and less than
      // the server's 3 s hold.
      EXPECT_GE(unknown_ns, 5 * 300'000'000ULL);
      EXPECT_LT(unknown_ns, 5 * 3'000'000'000ULL);
    }
    EXPECT_EQ(probes_->full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u);
    // The kernel's framing states read at each exit agreed with what the tracker had seen: no
    // connection was given up as lost (which would have counted none of the open streams).
    EXPECT_EQ(probes_->http2().stats().lost, 0u);
    EXPECT_EQ(probes_->http2().connections(), 0u);
  }
}

// Starts the workload's h2raw client (FRAMES connection WINDOW_UPDATEs per Write, WRITES Writes,
// then one more once the file GO_FILE.more exists) against its -h2 server, the client's binary
// instrumented before it connects: it waits for a go-ahead file (GO_FILE) this creates once every
// probe is attached. Once the client has written its WRITES Writes, `then(client, go_file)` runs.
void with_h2raw_client(TlsProbes& probes, int frames, int writes,
                       const std::function<void(ChildProcess&, const std::string&)>& then,
                       int pause_ms = 0) {
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "-h2", "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const std::string port = server.last_line().substr(std::string("listening ").size());
  char dir[] = "/tmp/sonde-gotls-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string go = std::string(dir) + "/go";
  ChildProcess client({SONDE_GOTLS_WORKLOAD, "h2raw", go, port, std::to_string(frames),
                       std::to_string(writes), std::to_string(pause_ms)});
  // It prints nothing before the go-ahead; ChildProcess returned after its exec, so /proc shows
  // what it runs.
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  TlsMonitor monitor(probes, cache, uprobes, proc);
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, client.pid(), "client"));
  std::ofstream(go).close();
  const bool written = client.wait_for_line("written", 30s);
  if (written) then(client, go);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(written) << "the client did not write";
}

// The same flood with a consumer that drains when the kernel wakes it, else every 2 s (the
// flood's Writes take far less): records past SONDE_GOTLS_H2_WAKEUP_BYTES wake it, so the flood
// is drained as it comes and nothing is lost, where no drain meanwhile loses the connection.
TEST_F(TlsProbesBpfTest, AFloodWakesTheConsumerBeforeTheRingBufferFills) {
  constexpr int kFloodFrames = 1000, kFloodWrites = 100, kFloodPauseMs = 10;
  std::atomic<int> wakeups = 0;
  std::jthread consumer([&](const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      probes_->drain();
      if (probes_->wait_for_records(2'000)) ++wakeups;
    }
  });
  const auto start = std::chrono::steady_clock::now();
  with_h2raw_client(
      *probes_, kFloodFrames, kFloodWrites,
      [&](ChildProcess& client, const std::string& go) {
        std::ofstream(go + ".more").close();
        ASSERT_TRUE(client.wait_for_line("done", 30s)) << "the client did not finish";
        const int status = client.wait();
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      },
      kFloodPauseMs);
  std::cout << "flood: " << wakeups.load() << " wakeups in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count()
            << " ms\n";
  EXPECT_GE(wakeups.load(), 1);
  EXPECT_EQ(probes_->full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u);
  EXPECT_EQ(probes_->http2().stats().followed, 2u);
  EXPECT_EQ(probes_->http2().stats().lost, 0u);
}

// The h2raw client's last Write comes after the ring buffer is drained; it must finish and
// exit 0.
void run_h2raw_client(TlsProbes& probes, int frames, int writes) {
  with_h2raw_client(probes, frames, writes, [&](ChildProcess& client, const std::string& go) {
    probes.drain();
    std::ofstream(go + ".more").close();
    ASSERT_TRUE(client.wait_for_line("done", 30s)) << "the client did not finish";
    const int status = client.wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  });
}

// One Write holding more frames than the kernel walks in a call (SONDE_GOTLS_H2_MAX_STEPS; a
// WINDOW_UPDATE is two steps: its header and its skipped payload) gives up that direction of the
// connection: counted once as h2_walk_steps and reported to user space as lost, with nothing of
// it counted as a request; the program it was written by runs on and exits 0.
TEST_F(TlsProbesBpfTest, AWriteOverTheWalkBoundLosesItsConnectionAndSaysSo) {
  ASSERT_NO_FATAL_FAILURE(run_h2raw_client(*probes_, SONDE_GOTLS_H2_MAX_STEPS / 2 + 100, 1));
  // Once in the first Write; the direction is dead after it, so not again in the last one.
  auto all = probes_->counts();  // drains the ring buffer first
  EXPECT_EQ(probes_->full(SONDE_GOTLS_H2_WALK_BOUND), 1u);
  EXPECT_EQ(probes_->full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u);
  // Probes are per file: the server (the same binary) is followed too, its Reads (one TLS record
  // each) stay under the bound.
  EXPECT_EQ(probes_->http2().stats().followed, 2u);
  EXPECT_GE(probes_->http2().stats().lost, 1u);
  for (const auto& [pid, counts] : all) {
    for (const auto& [k, s] : counts.requests) {
      EXPECT_EQ(k.protocol, SONDE_TLS_HTTP2) << "only the connection is counted, no stream";
    }
  }
}

// The ring buffer full (nothing drains it here before the last Write; the agent drains it every
// 100 ms): 200,000 WINDOW_UPDATE frames, an event of 56 bytes each when written (and again
// when the server reads them), over its 8 MiB. The events that did not fit are counted as
// h2_events; the next call on a connection after the drain tells user space it was lost; the
// programs run on.
TEST_F(TlsProbesBpfTest, AFullRingBufferLosesItsConnectionsAndSaysSo) {
  auto probes = probes_with_the_whole_ring_buffer_shared();
  ASSERT_NO_FATAL_FAILURE(run_h2raw_client(*probes, 4000, 50));
  probes->counts();  // drains the ring buffer
  EXPECT_GE(probes->full(SONDE_GOTLS_H2_RINGBUF_FULL), 1u);
  EXPECT_EQ(probes->full(SONDE_GOTLS_SHARE_H2_EVENTS), 0u);
  EXPECT_EQ(probes->full(SONDE_GOTLS_H2_WALK_BOUND), 0u);
  EXPECT_EQ(probes->http2().stats().followed, 2u);
  EXPECT_GE(probes->http2().stats().lost, 1u);
}

// With the default share, the same flood takes the client and the server past their quarter of
// the ring buffer before it fills: they lose their connection, and the buffer keeps room.
TEST_F(TlsProbesBpfTest, AFloodingProcessPassesItsShareBeforeTheRingBufferFills) {
  ASSERT_NO_FATAL_FAILURE(run_h2raw_client(*probes_, 4000, 50));
  probes_->counts();
  EXPECT_GE(probes_->full(SONDE_GOTLS_SHARE_H2_EVENTS), 1u);
  EXPECT_EQ(probes_->full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u);
  EXPECT_GE(probes_->http2().stats().lost, 1u);
}

// The kernel reports a direction it gave up (the ring buffer full) at the connection's next call
// in that direction. A client that floods, then exits (killed here, after the drain, before
// another Write) never makes one: its exit folds the loss in (TlsProbes::take() reads the
// direction's kernel state), so its connection is counted lost then, not left as followed.
TEST_F(TlsProbesBpfTest, ALossTheKernelHadNotReportedYetIsCountedAtTheExit) {
  auto probes = probes_with_the_whole_ring_buffer_shared();
  with_h2raw_client(*probes, 4000, 50, [&](ChildProcess& client, const std::string&) {
    probes->drain();
    std::this_thread::sleep_for(200ms);
    probes->drain();
    ASSERT_GE(probes->full(SONDE_GOTLS_H2_RINGBUF_FULL), 1u);
    const auto before = probes->http2().stats();
    const size_t followed_before = probes->http2().connections();
    kill(client.pid(), SIGKILL);
    client.wait();
    probes->take(static_cast<uint32_t>(client.pid()));
    EXPECT_EQ(followed_before - probes->http2().connections(), 1u)
        << "the client's connection was still followed: its loss not reported before the exit";
    EXPECT_EQ(probes->http2().stats().lost, before.lost + 1);
  });
}

// Kernels without bpf_loop (before 5.17) load the *_h1 programs: HTTP/1.x still counted exactly,
// an HTTP/2 connection counted by its preface, none of its streams. Forced here on a kernel that
// has bpf_loop, so the programs those kernels get are verified and run.
TEST_F(TlsProbesBpfTest, WithoutHttp2FramingHttp1IsCountedAndHttp2OnlyByConnection) {
  auto loaded = TlsProbes::load(/*perform_ret=*/false, uprobe_link_support().kind, /*http2=*/false);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  TlsProbes& probes = **loaded;
  ASSERT_FALSE(probes.follows_http2());
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  TlsMonitor monitor(probes, cache, uprobes, proc);
  for (bool h2 : {false, true}) {
    SCOPED_TRACE(h2 ? "HTTP/2" : "HTTP/1.1");
    std::vector<std::string> server_args = {SONDE_GOTLS_WORKLOAD, "server"};
    if (h2) server_args.insert(server_args.begin() + 1, "-h2");
    ChildProcess server(server_args);
    ASSERT_TRUE(server.wait_for_line("listening", 20s));
    const int port = std::stoi(server.last_line().substr(std::string("listening ").size()));
    ASSERT_NO_FATAL_FAILURE(track(monitor, proc, server.pid(), "server"));
    std::vector<std::string> client_args = {
        SONDE_GOTLS_WORKLOAD, "client", std::to_string(port), "200", "404", "500"};
    if (h2) client_args.insert(client_args.begin() + 1, "-h2");
    ChildProcess client(client_args);
    ASSERT_TRUE(client.wait_for_line("done 3", 20s));
    client.wait();
    auto all = probes.counts();
    for (pid_t pid : {client.pid(), server.pid()}) {
      std::map<int, uint64_t> by_protocol;
      for (const auto& [k, st] : all[static_cast<uint32_t>(pid)].requests) {
        by_protocol[k.protocol] += st.count;
      }
      if (h2) {
        EXPECT_EQ(by_protocol, (std::map<int, uint64_t>{{SONDE_TLS_HTTP2, 1}}));
      } else {
        EXPECT_EQ(by_protocol, (std::map<int, uint64_t>{{SONDE_TLS_HTTP1, 3}}));
      }
    }
    monitor.exited(client.pid());
    monitor.exited(server.pid());
  }
  EXPECT_EQ(probes.http2().stats().followed, 0u);
}

// Two agents that both perform the `ret` on one site (a DaemonSet rollout with maxSurge): the
// second program must see that the first already returned and leave the registers alone, or
// the Go program pops a second return address and crashes. Runs only where the kernel lets a
// uprobe program write registers (none the project was tested on: Linux 6.18 refuses); here it
// skips with the verifier's reason.
TEST_F(TlsProbesBpfTest, TwoAgentsPerformingOneRetLeaveTheProgramIntactAndCountExactly) {
  if (Status allowed = kernel_allows_uprobe_register_writes(); !allowed.ok()) {
    GTEST_SKIP() << "this kernel refuses uprobe register writes: " << allowed.error().message();
  }
  struct Agent {
    std::unique_ptr<TlsProbes> probes;
    symbols::ProbeTargetCache cache;
    SharedUprobes uprobes;
    std::unique_ptr<TlsMonitor> monitor;
  };
  ProcReader proc;
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const int port = std::stoi(server.last_line().substr(std::string("listening ").size()));
  auto info = proc.read(server.pid());
  ASSERT_TRUE(info.ok()) << info.error().message();
  std::array<Agent, 2> agents;
  for (Agent& a : agents) {
    auto p = TlsProbes::load(/*perform_ret=*/true);
    ASSERT_TRUE(p.ok()) << p.error().message();
    a.probes = std::move(*p);
    ASSERT_TRUE(a.probes->can_perform_ret()) << a.probes->register_writes();
    a.monitor = std::make_unique<TlsMonitor>(*a.probes, a.cache, a.uprobes, proc);
    auto candidate = open_candidate(proc, *info, true);
    ASSERT_TRUE(candidate.ok()) << candidate.error().message();
    ASSERT_EQ(a.monitor->consider(*candidate, {"", "", "server"}), TlsMonitor::Outcome::kTracked);
    ASSERT_EQ(a.monitor->verdicts().at(0).return_probe, "bpf-ret");
  }

  // A client under load (new connections, many Reads returning on the probed RETs), and many
  // round trips on one connection: each exits 0 with its output, and both agents count every
  // request of both sides.
  ChildProcess load({SONDE_GOTLS_WORKLOAD, "load", std::to_string(port), "3", "300"});
  ASSERT_TRUE(load.wait_for_line("done", 30s)) << "the client did not finish";
  const uint64_t sent = std::stoull(load.last_line().substr(std::string("done ").size()));
  int status = load.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_GT(sent, 0u);
  for (Agent& a : agents) {
    bool counted = false;
    EXPECT_EQ(requests_of(*a.probes, load.pid(), &counted), sent);
    EXPECT_EQ(requests_of(*a.probes, server.pid(), &counted), sent);
    for (const auto& [map, n] : a.monitor->kernel_map_full()) EXPECT_EQ(n, 0u) << map.first;
  }
  ChildProcess echo({SONDE_GOTLS_WORKLOAD, "echo", "20000", "64"});
  ASSERT_TRUE(echo.wait_for_line("", 60s));
  status = echo.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GT(std::stod(echo.last_line()), 0.0) << echo.last_line();
  EXPECT_EQ(kill(server.pid(), 0), 0) << "the server died";
}

// Probe hits are counted per process in the kernel, by kind of site, one per call: a client
// that makes its own (*tls.Conn).Write and .Read calls (no bufio, no net/http) and says how many
// it made is the ground truth. Entry probes sit on the stack check's `jbe` (emulated), the RETs
// are single-stepped; nothing is counted at a kind of site the binary does not use.
TEST_F(TlsProbesBpfTest, ProbeHitsPerProcessEqualTheCallsItMade) {
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  ProcReader proc;
  TlsMonitor monitor(*probes_, cache, uprobes, proc);
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const std::string port = server.last_line().substr(std::string("listening ").size());
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, server.pid(), "server"));
  ASSERT_EQ(monitor.verdicts().at(0).entry_probe, "emulated-jump");
  ASSERT_EQ(monitor.verdicts().at(0).return_probe, "single-step");

  for (int requests : {1, 2000}) {
    ChildProcess client({SONDE_GOTLS_WORKLOAD, "calls", port, std::to_string(requests)});
    ASSERT_TRUE(client.wait_for_line("calls", 30s));
    std::istringstream line(client.last_line());
    std::string word;
    uint64_t n = 0, writes = 0, reads = 0;
    line >> word >> n >> word >> writes >> word >> reads;
    ASSERT_EQ(n, static_cast<uint64_t>(requests)) << client.last_line();
    ASSERT_GE(reads, n) << client.last_line();
    int status = client.wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    auto all = probes_->counts();
    auto it = all.find(static_cast<uint32_t>(client.pid()));
    ASSERT_NE(it, all.end()) << "the client is counted";
    const auto& hits = it->second.process.hits;
    std::cout << requests << " requests: " << writes << " writes, " << reads
              << " reads; hits: entry emulated " << hits[SONDE_GOTLS_SITE_ENTRY_EMULATED]
              << ", return single-stepped " << hits[SONDE_GOTLS_SITE_RETURN_SINGLE_STEP] << "\n";
    EXPECT_EQ(hits[SONDE_GOTLS_SITE_ENTRY_EMULATED], writes + reads);
    EXPECT_EQ(hits[SONDE_GOTLS_SITE_RETURN_SINGLE_STEP], reads);
    EXPECT_EQ(hits[SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP], 0u);
    EXPECT_EQ(hits[SONDE_GOTLS_SITE_RETURN_BPF_RET], 0u);
    monitor.exited(client.pid());
  }
  EXPECT_EQ(probes_->full(SONDE_GOTLS_FULL_PROCESSES), 0u);
}

// A container's series outlive its last process by the grace period, then leave: every pod
// ever seen must not keep its series until the agent restarts.
TEST_F(TlsProbesBpfTest, AContainersSeriesLeaveAGracePeriodAfterItsLastProcess) {
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  ProcReader proc;
  TlsMonitor monitor(*probes_, cache, uprobes, proc, /*grace_ns=*/500'000'000);
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, server.pid(), "gone-soon"));
  EXPECT_EQ(monitor.snapshot().count({"", "", "gone-soon"}), 1u);
  kill(server.pid(), SIGKILL);
  server.wait();
  monitor.sweep();  // finds it gone: its series stay for the grace period
  EXPECT_EQ(monitor.snapshot().count({"", "", "gone-soon"}), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  monitor.sweep();
  EXPECT_EQ(monitor.snapshot().count({"", "", "gone-soon"}), 0u);
}

// Each process holds at most its share of each node-wide table (TlsProbes::Shares; h2_states's
// lowered here to kShare entries, the others as in the agent). A hostile client holds kConnections
// HTTP/2 connections open against one server: it and that server follow kShare / 2 of them (two
// framing states each) and lose the rest, counted against themselves in the kernel and in their
// container's series; a second client and server, running meanwhile, have every stream counted
// exactly and lose nothing.
TEST_F(TlsProbesBpfTest, AProcessOverItsShareLosesOnlyItsOwnConnections) {
  constexpr uint32_t kShare = 8;
  constexpr int kConnections = 20;
  TlsProbes::Shares shares = TlsProbes::default_shares();
  shares[SONDE_GOTLS_SHARED_H2_STATES] = kShare;
  auto loaded = TlsProbes::load(false, uprobe_link_support().kind, true, shares);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  TlsProbes& probes = **loaded;
  if (!probes.follows_http2()) GTEST_SKIP() << "no bpf_loop: HTTP/2 framing is not followed";
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  TlsMonitor monitor(probes, cache, uprobes, proc);

  ChildProcess crowded({SONDE_GOTLS_WORKLOAD, "-h2", "server"});
  ChildProcess quiet({SONDE_GOTLS_WORKLOAD, "-h2", "server"});
  ASSERT_TRUE(crowded.wait_for_line("listening", 20s));
  ASSERT_TRUE(quiet.wait_for_line("listening", 20s));
  const std::string crowded_port = crowded.last_line().substr(std::string("listening ").size());
  const std::string quiet_port = quiet.last_line().substr(std::string("listening ").size());
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, crowded.pid(), "crowded"));
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, quiet.pid(), "quiet"));

  ChildProcess hostile(
      {SONDE_GOTLS_WORKLOAD, "prefaces", crowded_port, std::to_string(kConnections)});
  ASSERT_TRUE(hostile.wait_for_line("opened", 30s)) << "the hostile client did not connect";
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, hostile.pid(), "hostile"));

  std::vector<std::string> args = {SONDE_GOTLS_WORKLOAD, "-h2", "streams", quiet_port, "2"};
  for (int i = 0; i < 10; ++i) args.emplace_back("200");
  for (int i = 0; i < 5; ++i) args.emplace_back("404");
  ChildProcess client(args);
  ASSERT_TRUE(client.wait_for_line("done 31", 30s)) << "client did not finish";
  int status = client.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  // The crowded server reads each preface after the hostile client wrote it: wait until it has
  // seen them all (each followed or refused), as the kernel counts prefaces before following.
  auto prefaces_of = [&probes](pid_t pid) {
    uint64_t n = 0;
    auto all = probes.counts();
    for (const auto& [k, s] : all[static_cast<uint32_t>(pid)].requests) {
      if (k.protocol == SONDE_TLS_HTTP2) n += s.count;
    }
    return n;
  };
  for (auto end = std::chrono::steady_clock::now() + 10s;
       prefaces_of(crowded.pid()) < kConnections && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(10ms);
  }
  auto all = probes.counts();
  for (pid_t pid : {hostile.pid(), crowded.pid()}) {
    SCOPED_TRACE(pid == hostile.pid() ? "hostile client" : "crowded server");
    const auto& c = all[static_cast<uint32_t>(pid)];
    EXPECT_EQ(prefaces_of(pid), static_cast<uint64_t>(kConnections)) << "every connection counted";
    EXPECT_EQ(c.process.held[SONDE_GOTLS_SHARED_H2_STATES], static_cast<int64_t>(kShare));
    EXPECT_GE(c.process.over_share[SONDE_GOTLS_SHARED_H2_STATES], kConnections - kShare / 2);
  }
  // The hostile client only writes: one refusal per connection past its share, exactly.
  EXPECT_EQ(
      all[static_cast<uint32_t>(hostile.pid())].process.over_share[SONDE_GOTLS_SHARED_H2_STATES],
      static_cast<uint64_t>(kConnections - kShare / 2));

  for (pid_t pid : {client.pid(), quiet.pid()}) {
    SCOPED_TRACE(pid == client.pid() ? "quiet client" : "quiet server");
    std::map<int, uint64_t> by_class;
    uint64_t prefaces = 0;
    for (const auto& [k, s] : all[static_cast<uint32_t>(pid)].requests) {
      if (k.protocol == SONDE_TLS_HTTP2) {
        prefaces += s.count;
        continue;
      }
      EXPECT_EQ(k.protocol, SONDE_TLS_HTTP2_STREAM);
      by_class[k.status_class] += s.count;
    }
    EXPECT_EQ(by_class[2], 21u) << "2 rounds of 10 GETs and the HEAD that opens the connection";
    EXPECT_EQ(by_class[4], 10u);
    EXPECT_EQ(by_class.size(), 2u);
    EXPECT_EQ(prefaces, 1u);
    for (uint64_t n : all[static_cast<uint32_t>(pid)].process.over_share) EXPECT_EQ(n, 0u);
  }
  EXPECT_EQ(probes.full(SONDE_GOTLS_FULL_H2_STATES), 0u) << "the table itself never filled";
  EXPECT_GE(probes.full(SONDE_GOTLS_SHARE_H2_STATES), 2u * (kConnections - kShare / 2));
  EXPECT_EQ(probes.full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u);
  EXPECT_EQ(probes.http2().stats().lost, 0u);

  // Counted against the container, with its series.
  const auto snapshot = monitor.snapshot();
  ASSERT_EQ(snapshot.count({"", "", "hostile"}), 1u);
  EXPECT_EQ(snapshot.at({"", "", "hostile"}).over_share[SONDE_GOTLS_SHARED_H2_STATES],
            static_cast<uint64_t>(kConnections - kShare / 2));
  EXPECT_EQ(snapshot.at({"", "", "quiet"}).over_share[SONDE_GOTLS_SHARED_H2_STATES], 0u);
  const auto lost = monitor.kernel_map_full();
  EXPECT_GE(lost.at({"h2_states", "process_share"}), 2u * (kConnections - kShare / 2));
  EXPECT_EQ(lost.at({"h2_states", "map_full"}), 0u);
  monitor.exited(hostile.pid());
  monitor.exited(crowded.pid());
  monitor.exited(quiet.pid());
}

// A connection closed with no Read pending leaves HTTP/1.x state that no failed Read frees: the
// workload's `stale` client writes a GET on each of 4 connections, reads one byte of each answer
// and closes it (an exchange and a carried byte each). With a share of 4 of each table, the
// client then holds its whole share, so its next connections would go unfollowed. forget_idle()
// leaves entries younger than its limit alone, frees older ones and gives them back to the
// process's share: the next 4 connections are followed, none refused. Each request freed so is
// counted once, status unknown, and is counted again neither at the exit nor at the next counts().
TEST_F(TlsProbesBpfTest, StateOfConnectionsClosedWithNoReadPendingIsFreedWhenIdle) {
  constexpr uint32_t kShare = 4;
  TlsProbes::Shares shares = TlsProbes::default_shares();
  shares[SONDE_GOTLS_SHARED_EXCHANGES] = kShare;
  shares[SONDE_GOTLS_SHARED_CARRIED] = kShare;
  auto loaded = TlsProbes::load(false, uprobe_link_support().kind, true, shares);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  TlsProbes& probes = **loaded;
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  TlsMonitor monitor(probes, cache, uprobes, proc);

  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const std::string port = server.last_line().substr(std::string("listening ").size());
  char dir[] = "/tmp/sonde-gotls-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string go = std::string(dir) + "/go";
  ChildProcess client({SONDE_GOTLS_WORKLOAD, "stale", go, port, std::to_string(kShare)});
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, client.pid(), "client"));
  const auto tgid = static_cast<uint32_t>(client.pid());
  // GETs of tgid counted with status_class unknown, and every request of tgid.
  auto unknown_gets = [tgid](const TlsProbes::Counts& c, uint64_t* all) {
    uint64_t n = 0;
    *all = 0;
    for (const auto& [k, s] : c.requests) {
      EXPECT_EQ(k.tgid, tgid);
      *all += s.count;
      if (k.method == SONDE_HTTP_GET && k.status_class == 0 && k.protocol == SONDE_TLS_HTTP1 &&
          k.direction == SONDE_TLS_CLIENT) {
        n += s.count;
      }
    }
    return n;
  };

  std::ofstream(go).close();
  const bool first = client.wait_for_line("stale 4", 20s);
  std::filesystem::remove(go);
  ASSERT_TRUE(first) << "the client did not make its connections";
  auto held = [&probes, tgid](sonde_gotls_shared_table t) {
    return probes.counts()[tgid].process.held[t];
  };
  EXPECT_EQ(held(SONDE_GOTLS_SHARED_EXCHANGES), kShare);
  EXPECT_EQ(held(SONDE_GOTLS_SHARED_CARRIED), kShare);

  // Younger than the limit: kept.
  auto freed = probes.forget_idle(monotonic_ns() - 3'600'000'000'000ULL);
  EXPECT_EQ(freed.exchanges, 0u);
  EXPECT_EQ(freed.carried, 0u);
  EXPECT_EQ(held(SONDE_GOTLS_SHARED_EXCHANGES), kShare);

  freed = probes.forget_idle(monotonic_ns());
  EXPECT_EQ(freed.exchanges, kShare);
  EXPECT_EQ(freed.carried, kShare);
  EXPECT_EQ(held(SONDE_GOTLS_SHARED_EXCHANGES), 0);
  EXPECT_EQ(held(SONDE_GOTLS_SHARED_CARRIED), 0);
  uint64_t all = 0;
  EXPECT_EQ(unknown_gets(probes.counts()[tgid], &all), kShare);
  EXPECT_EQ(all, kShare);

  std::ofstream(go + ".more").close();
  const bool second = client.wait_for_line("stale 8", 20s);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(second) << "the client did not make its next connections";
  const auto after = probes.counts()[tgid].process;
  EXPECT_EQ(after.held[SONDE_GOTLS_SHARED_EXCHANGES], kShare);
  EXPECT_EQ(after.held[SONDE_GOTLS_SHARED_CARRIED], kShare);
  EXPECT_EQ(after.over_share[SONDE_GOTLS_SHARED_EXCHANGES], 0u) << "its share was given back";
  EXPECT_EQ(after.over_share[SONDE_GOTLS_SHARED_CARRIED], 0u);

  kill(client.pid(), SIGKILL);
  client.wait();
  // 4 freed while idle, 4 still open at the exit: each counted once.
  EXPECT_EQ(unknown_gets(probes.take(tgid), &all), 2 * kShare);
  EXPECT_EQ(all, 2 * kShare);
  EXPECT_EQ(probes.counts().count(tgid), 0u) << "nothing of the process left";
  EXPECT_EQ(probes.forgotten().exchanges, kShare);
  monitor.exited(client.pid());
  kill(server.pid(), SIGKILL);
  server.wait();
}

// The HTTP/2 ring buffer is shared as the tables are: a process may have at most its share of
// its bytes written and not yet read by user space (lowered here to kShareBytes; nothing drains
// in this test until counts()), and past it only while less than 3 times that waits in the buffer.
// A client sends 200 requests on one connection: it and its server pass their share and lose that
// connection, counted against each, while the ring buffer itself never fills. The drain gives the
// bytes back: the same server then follows a quiet client's connection exactly.
TEST_F(TlsProbesBpfTest, AProcessOverItsRingBufferShareLosesOnlyItsOwnConnections) {
  constexpr uint32_t kShareBytes = 16 * 1024;
  TlsProbes::Shares shares = TlsProbes::default_shares();
  shares[SONDE_GOTLS_SHARED_H2_EVENTS] = kShareBytes;
  auto loaded = TlsProbes::load(false, uprobe_link_support().kind, true, shares);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  TlsProbes& probes = **loaded;
  if (!probes.follows_http2()) GTEST_SKIP() << "no bpf_loop: HTTP/2 framing is not followed";
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  TlsMonitor monitor(probes, cache, uprobes, proc);
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "-h2", "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const std::string port = server.last_line().substr(std::string("listening ").size());
  ASSERT_NO_FATAL_FAILURE(track(monitor, proc, server.pid(), "server"));

  // Stream counts by status class (2, 4) of one process, and its refusals by table.
  auto streams_of = [&probes](pid_t pid) {
    std::map<int, uint64_t> by_class;
    auto all = probes.counts();
    for (const auto& [k, s] : all[static_cast<uint32_t>(pid)].requests) {
      if (k.protocol == SONDE_TLS_HTTP2_STREAM) by_class[k.status_class] += s.count;
    }
    return by_class;
  };
  auto over_share = [&probes](pid_t pid) {
    std::array<uint64_t, SONDE_GOTLS_SHARED_COUNT> out{};
    const auto all = probes.counts();
    if (auto it = all.find(static_cast<uint32_t>(pid)); it != all.end()) {
      std::copy(std::begin(it->second.process.over_share), std::end(it->second.process.over_share),
                out.begin());
    }
    return out;
  };

  std::vector<std::string> flood_args = {SONDE_GOTLS_WORKLOAD, "-h2", "streams", port, "20"};
  for (int i = 0; i < 10; ++i) flood_args.emplace_back("200");
  ChildProcess flood(flood_args);
  ASSERT_TRUE(flood.wait_for_line("done 201", 60s)) << "the flooding client did not finish";
  int status = flood.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const uint64_t flood_counted = streams_of(flood.pid())[2];
  EXPECT_LT(flood_counted, 201u) << "the flooding client's connection is given up";
  EXPECT_GE(over_share(flood.pid())[SONDE_GOTLS_SHARED_H2_EVENTS], 1u);
  EXPECT_GE(over_share(server.pid())[SONDE_GOTLS_SHARED_H2_EVENTS], 1u);
  EXPECT_GE(probes.full(SONDE_GOTLS_SHARE_H2_EVENTS), 2u);
  EXPECT_EQ(probes.full(SONDE_GOTLS_H2_RINGBUF_FULL), 0u) << "the ring buffer itself never filled";
  EXPECT_GE(probes.http2().stats().lost, 1u) << "the tracker is told";
  std::cout << "flooding client: " << flood_counted << " of 201 streams counted, "
            << over_share(flood.pid())[SONDE_GOTLS_SHARED_H2_EVENTS] << " records refused; server: "
            << over_share(server.pid())[SONDE_GOTLS_SHARED_H2_EVENTS] << "\n";

  // counts() drained the ring buffer: the server's bytes are given back.
  const auto server_before = streams_of(server.pid());
  const uint64_t refused_before = over_share(server.pid())[SONDE_GOTLS_SHARED_H2_EVENTS];
  ChildProcess quiet({SONDE_GOTLS_WORKLOAD, "-h2", "streams", port, "2", "200", "404"});
  ASSERT_TRUE(quiet.wait_for_line("done 5", 30s)) << "the quiet client did not finish";
  status = quiet.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto quiet_streams = streams_of(quiet.pid());
  EXPECT_EQ(quiet_streams.at(2), 3u) << "2 GETs and the HEAD that opens the connection";
  EXPECT_EQ(quiet_streams.at(4), 2u);
  for (uint64_t n : over_share(quiet.pid())) EXPECT_EQ(n, 0u);
  auto server_after = streams_of(server.pid());
  auto before = [&server_before](int c) {
    auto it = server_before.find(c);
    return it == server_before.end() ? uint64_t{0} : it->second;
  };
  EXPECT_EQ(server_after[2] - before(2), 3u) << "the server follows the new connection";
  EXPECT_EQ(server_after[4] - before(4), 2u);
  EXPECT_EQ(over_share(server.pid())[SONDE_GOTLS_SHARED_H2_EVENTS], refused_before);
  const auto snapshot = monitor.snapshot();
  ASSERT_EQ(snapshot.count({"", "", "server"}), 1u);
  EXPECT_GE(snapshot.at({"", "", "server"}).over_share[SONDE_GOTLS_SHARED_H2_EVENTS], 1u);
  EXPECT_GE(monitor.kernel_map_full().at({"h2_events", "process_share"}), 2u);
  monitor.exited(server.pid());
}

}  // namespace
}  // namespace sonde::agent
