// PoolMonitor against the truth:
//   - the real node (Debian's, or SONDE_TEST_NODE: ctest runs it once per official build) with
//     UV_THREADPOOL_SIZE=4: batches of 16 crypto.pbkdf2, and 6 fs.read on FIFOs held by the test
//     workload (threadpool_truth.js). The process stamps each batch's submit and each callback
//     with CLOCK_MONOTONIC; from those the busy threads, the queued tasks and the saturated time
//     follow (N tasks on T threads: queued = N - T - done, busy = min(T, N - done), saturated
//     from the submit to the (N - T)th callback). The monitor is polled every 10 ms as the
//     feature does; each reading is compared with the truth around its instant, and the
//     saturated seconds with the sum over batches.
//   - PIE fixtures (fake_pool.c): the load bias applied, and the verdicts of binaries whose
//     symbols are missing, ambiguous or of another size.
#include "agent/nodejs_threadpool/pool_monitor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/tests/child_process.h"

namespace sonde::agent::threadpool {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;

std::string node_path() {
  const char* env = std::getenv("SONDE_TEST_NODE");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/node";
}

constexpr uint64_t kPollPeriodNs = 10'000'000;
// Readings this close to a batch's submit or end belong to it.
constexpr uint64_t kMatchWindowNs = 25'000'000;
// Callbacks stamped closer together than this ran in one run of libuv's uv__work_done (which
// runs the callbacks of every task finished when it starts, back to back).
constexpr uint64_t kCallbackRunGapNs = 5'000'000;
// How long after the last post an idle pool thread may still wait for a CPU to wake up (libuv
// counts it idle until it runs): 85 ms seen here with three busy loops on the 2 cores.
constexpr uint64_t kWakeUpNs = 250'000'000;
// A pool thread that ended a task posts its callback before it takes the next task; on a
// loaded machine it may wait this long for a CPU in between, counted busy with the task still
// queued, while the main thread already ran the callback.
constexpr uint64_t kTakeNextLagNs = 100'000'000;

struct Reading {
  uint64_t at_ns;    // just after the poll that took it
  uint64_t from_ns;  // just before that poll
  uint64_t busy;
  uint64_t queued;
  uint64_t threads;
};

// N tasks submitted at once to a pool of T threads, stamped by the process.
struct Batch {
  uint64_t submit_ns = 0;              // before the first task is posted
  uint64_t posted_ns = 0;              // after the last one
  std::vector<uint64_t> callbacks_ns;  // sorted
  uint64_t tasks() const { return callbacks_ns.size(); }
  uint64_t done_by(uint64_t t) const {
    return static_cast<uint64_t>(std::upper_bound(callbacks_ns.begin(), callbacks_ns.end(), t) -
                                 callbacks_ns.begin());
  }
  // Busy threads and queued tasks once `done` tasks ended, for a pool of `threads`.
  std::pair<uint64_t, uint64_t> state(uint64_t done, uint64_t threads) const {
    const uint64_t left = tasks() - done;
    return {std::min(threads, left), left > threads ? left - threads : 0};
  }
  // The truth at t, by the callbacks' stamps.
  std::pair<uint64_t, uint64_t> busy_queued(uint64_t t, uint64_t threads) const {
    return t < submit_ns ? std::pair<uint64_t, uint64_t>{0, 0} : state(done_by(t), threads);
  }
  // From the submit until the (N - T)th task ended: every thread busy, work waiting. Every
  // thread is busy only once the idle ones woke, which on a loaded machine takes a while the
  // process cannot see: from `readings` (checked against the truth first), the saturation
  // starts at the first reading with every thread busy and a task queued, less half a period
  // (where the trapezoid puts it), if that is later than the submit.
  double saturated_seconds(uint64_t threads, const std::vector<Reading>& readings) const {
    uint64_t start = submit_ns;
    for (const auto& r : readings) {
      if (r.at_ns >= submit_ns && r.busy == threads && r.queued > 0) {
        start = std::max(start, r.at_ns - kPollPeriodNs / 2);
        break;
      }
    }
    return static_cast<double>(callbacks_ns[tasks() - threads - 1] - start) / 1e9;
  }
  uint64_t end_ns() const { return callbacks_ns.back(); }
  // While the tasks are being posted, and until the idle threads they wake have run (before any
  // task ended, and at most kWakeUpNs), any split of the tasks is true: at most `threads` busy,
  // the others queued (while posting: not all posted yet). Such a reading is checked so.
  bool in_ramp(const Reading& r) const {
    return r.at_ns + kMatchWindowNs >= submit_ns &&
           r.at_ns <= std::min(posted_ns + kWakeUpNs, callbacks_ns.front());
  }
  bool within_bounds(const Reading& r, uint64_t threads) const {
    const bool posting = r.at_ns <= posted_ns + kMatchWindowNs;
    return r.busy <= threads &&
           (posting ? r.busy + r.queued <= tasks() : r.busy + r.queued == tasks());
  }
  // Whether a reading taken between `from` and t shows the pool after some number of tasks it
  // may have seen ended: at least those whose callbacks ran kTakeNextLagNs before `from` (as
  // the queue shows them: a thread takes the next task after posting the callback), at most
  // those whose callbacks ran by the end of the second run of callbacks after t. A task a pool
  // thread ended by t has its callback run by the first uv__work_done that starts after t (the
  // one running at t, if any, took its tasks before), however late the main thread gets to it
  // on a loaded machine: the process's stamps lag the pool, never lead it.
  bool matches(const Reading& r, uint64_t threads) const {
    if (in_ramp(r) && within_bounds(r, threads)) return true;
    const uint64_t lo = r.from_ns > kTakeNextLagNs ? done_by(r.from_ns - kTakeNextLagNs) : 0;
    uint64_t hi = done_by(r.at_ns);
    for (int run = 0; run < 2 && hi < tasks(); ++run) {
      ++hi;  // the first callback after the previous run starts this one
      while (hi < tasks() && callbacks_ns[hi] - callbacks_ns[hi - 1] < kCallbackRunGapNs) ++hi;
    }
    for (uint64_t done = lo; done <= hi; ++done) {
      if (state(done, threads) == std::pair{r.busy, r.queued}) return true;
    }
    return false;
  }
};

std::vector<uint64_t> parse_numbers(const std::string& line, size_t skip) {
  std::istringstream in(line);
  std::string word;
  std::vector<uint64_t> out;
  for (size_t i = 0; in >> word; ++i) {
    if (i >= skip) out.push_back(std::stoull(word));
  }
  return out;
}

class PoolMonitorTest : public ::testing::Test {
 protected:
  // Starts `argv` (its exe must contain `exe_name`), waits for "ready", has the monitor consider
  // it.
  PoolMonitor::Outcome start(std::vector<std::string> argv, const std::string& exe_name,
                             std::string* why = nullptr) {
    child_ = std::make_unique<ChildProcess>(std::move(argv));
    EXPECT_TRUE(testing::wait_for_exe(child_->pid(), exe_name, 10s));
    EXPECT_TRUE(child_->wait_for_line("ready", 60s)) << "the workload did not start";
    auto info = proc_.read(child_->pid());
    EXPECT_TRUE(info.ok());
    auto c = open_candidate(proc_, *info, true);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
    return monitor_.consider(*c, labels_, why);
  }

  // Polls every kPollPeriodNs until `done` says so, keeping each reading.
  template <typename Done>
  std::vector<Reading> poll_until(Done&& done) {
    std::vector<Reading> out;
    std::atomic<bool> stop = false;
    std::thread poller([&] {
      auto next = std::chrono::steady_clock::now();
      while (!stop) {
        const uint64_t from = real_clock().now_ns();
        monitor_.poll();
        const uint64_t at = real_clock().now_ns();
        for (const auto& s : monitor_.samples()) {
          if (s.labels == labels_) out.push_back({at, from, s.busy, s.queued, s.threads});
        }
        // Late (a loaded machine): the next slot from now, as the feature's poller does.
        next = std::max(next + std::chrono::nanoseconds(kPollPeriodNs),
                        std::chrono::steady_clock::now());
        std::this_thread::sleep_until(next);
      }
    });
    done();
    stop = true;
    poller.join();
    return out;
  }

  double saturated_seconds() {
    for (const auto& s : monitor_.samples()) {
      if (s.labels == labels_) return s.saturated_seconds;
    }
    return -1;
  }

  // Checks the readings against `batches` on a pool of `threads`; prints the staircase.
  void check_readings(const std::vector<Reading>& readings, const std::vector<Batch>& batches,
                      uint64_t threads) {
    size_t in_batches = 0, matched = 0, ramp = 0;
    for (const auto& b : batches) {
      std::string stairs;
      uint64_t last = UINT64_MAX;
      for (const auto& r : readings) {
        if (r.at_ns + kMatchWindowNs < b.submit_ns || r.at_ns > b.end_ns() + kMatchWindowNs) {
          continue;
        }
        EXPECT_EQ(r.threads, threads);
        ++in_batches;
        if (b.matches(r, threads)) {
          ++matched;
          if (b.in_ramp(r)) ++ramp;
        } else {
          ADD_FAILURE() << "reading at +" << (static_cast<int64_t>(r.at_ns - b.submit_ns) / 1000000)
                        << " ms: busy " << r.busy << " queued " << r.queued << ", truth "
                        << b.busy_queued(r.at_ns, threads).first << "/"
                        << b.busy_queued(r.at_ns, threads).second;
        }
        if (r.queued != last) stairs += " " + std::to_string(r.queued);
        last = r.queued;
      }
      std::printf("queued tasks read over a batch of %" PRIu64 " tasks:%s\n", b.tasks(),
                  stairs.c_str());
    }
    std::printf(
        "%zu readings matched the truth (%zu of them while tasks were posted and threads "
        "woke)\n",
        matched, ramp);
    // A batch spans hundreds of readings: not one may disagree with the truth.
    EXPECT_GT(in_batches, 20u * batches.size());
    EXPECT_EQ(matched, in_batches);
  }

  symbols::ProbeTargetCache cache_;
  ProcReader proc_;
  PoolMonitor monitor_{cache_, proc_, 60'000'000'000};
  ContainerLabels labels_{"ns", "pod", "app"};
  std::unique_ptr<ChildProcess> child_;
};

std::string truth_script() {
  return std::string(SONDE_SOURCE_DIR) + "/agent/nodejs_threadpool/tests/threadpool_truth.js";
}

TEST_F(PoolMonitorTest, Pbkdf2BatchesFollowTheStaircaseAndTheSaturatedTime) {
  constexpr int kBatches = 2;
  ASSERT_EQ(start({"/usr/bin/env", "UV_THREADPOOL_SIZE=4", node_path(), truth_script(), "pbkdf2",
                   std::to_string(kBatches), "100000"},
                  node_path().substr(node_path().rfind('/') + 1)),
            PoolMonitor::Outcome::kTracked);
  const double before = saturated_seconds();
  std::vector<Batch> batches;
  auto readings = poll_until([&] {
    ASSERT_EQ(kill(child_->pid(), SIGUSR2), 0);
    for (int i = 0; i < kBatches; ++i) {
      ASSERT_TRUE(child_->wait_for_line("pbkdf2 ", 120s)) << "batch " << i << " did not end";
      auto n = parse_numbers(child_->last_line(), 1);
      ASSERT_EQ(n.size(), 18u);
      Batch b{n[0], n[1], {n.begin() + 2, n.end()}};
      std::sort(b.callbacks_ns.begin(), b.callbacks_ns.end());
      batches.push_back(std::move(b));
    }
    ASSERT_TRUE(child_->wait_for_line("done", 10s));
    std::this_thread::sleep_for(50ms);  // a reading after the last callback
  });
  ASSERT_EQ(batches.size(), static_cast<size_t>(kBatches));
  check_readings(readings, batches, 4);
  double truth = 0;
  for (const auto& b : batches) truth += b.saturated_seconds(4, readings);
  const double measured = saturated_seconds() - before;
  // Each batch: two changes of state, each placed within a poll period (plus a late poll on a
  // loaded machine and the callback's lag), so 40 ms and 3 % per batch.
  const double tolerance = kBatches * 0.040 + 0.03 * truth;
  std::printf("saturated seconds: monitor %.3f, process %.3f (tolerance %.3f)\n", measured, truth,
              tolerance);
  EXPECT_NEAR(measured, truth, tolerance);
  const auto stats = monitor_.stats();
  EXPECT_EQ(stats.walks_truncated, 0u);
  std::printf("readings %" PRIu64 ", torn %" PRIu64 ", unreadable %" PRIu64 "\n", stats.readings,
              stats.failures[static_cast<size_t>(ReadFailure::kTorn)],
              stats.failures[static_cast<size_t>(ReadFailure::kUnreadable)]);
  EXPECT_EQ(stats.failures[static_cast<size_t>(ReadFailure::kImplausible)], 0u);
  EXPECT_EQ(stats.failures[static_cast<size_t>(ReadFailure::kUnreadable)], 0u);
}

TEST_F(PoolMonitorTest, FsReadsHeldOnFifosSaturateThePoolUntilReleased) {
  const std::string dir = ::testing::TempDir() + "/threadpool_fifos_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 6; ++i) {
    const std::string fifo = dir + "/fifo" + std::to_string(i);
    std::filesystem::remove(fifo);
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  }
  // UV_USE_IO_URING=0: a libuv that would read through io_uring leaves the pool out.
  ASSERT_EQ(start({"/usr/bin/env", "UV_THREADPOOL_SIZE=4", "UV_USE_IO_URING=0", node_path(),
                   truth_script(), "fifo", "800", "400", dir},
                  node_path().substr(node_path().rfind('/') + 1)),
            PoolMonitor::Outcome::kTracked);
  const double before = saturated_seconds();
  Batch b;
  auto readings = poll_until([&] {
    ASSERT_EQ(kill(child_->pid(), SIGUSR2), 0);
    ASSERT_TRUE(child_->wait_for_line("fifo ", 60s));
    auto n = parse_numbers(child_->last_line(), 1);
    ASSERT_EQ(n.size(), 10u);
    b.submit_ns = n[0];
    b.posted_ns = n[1];
    b.callbacks_ns.assign(n.begin() + 4, n.end());
    std::sort(b.callbacks_ns.begin(), b.callbacks_ns.end());
    std::this_thread::sleep_for(50ms);
  });
  std::filesystem::remove_all(dir);
  ASSERT_EQ(b.tasks(), 6u);
  check_readings(readings, {b}, 4);
  const double truth = b.saturated_seconds(4, readings);
  const double measured = saturated_seconds() - before;
  std::printf("saturated seconds: monitor %.3f, process %.3f\n", measured, truth);
  EXPECT_NEAR(measured, truth, 0.040 + 0.03 * truth);
}

TEST_F(PoolMonitorTest, AQueueLongerThanTheBoundReadsTheBoundAndIsCounted) {
  // 4 long tasks hold the threads; 1,000 short ones wait behind them, far past kMaxQueueNodes.
  ASSERT_EQ(
      start({"/usr/bin/env", "UV_THREADPOOL_SIZE=4", node_path(), truth_script(), "flood", "1000"},
            node_path().substr(node_path().rfind('/') + 1)),
      PoolMonitor::Outcome::kTracked);
  ASSERT_EQ(kill(child_->pid(), SIGUSR2), 0);
  ASSERT_TRUE(child_->wait_for_line("flood posted", 30s));
  // The 4 long tasks run for seconds: readings now see every thread busy and the queue full.
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    monitor_.poll();
    for (const auto& s : monitor_.samples()) {
      if (s.labels == labels_ && s.busy == 4 && s.queued == kMaxQueueNodes) seen = true;
    }
    if (!seen) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(seen) << "no reading of 4 busy threads and " << kMaxQueueNodes << " queued tasks";
  const auto stats = monitor_.stats();
  EXPECT_GE(stats.walks_truncated, 1u);
  std::printf("readings %" PRIu64 ", at the bound %" PRIu64 ", torn %" PRIu64 "\n", stats.readings,
              stats.walks_truncated, stats.failures[static_cast<size_t>(ReadFailure::kTorn)]);
  // Saturated all along: every reading after the first counts.
  monitor_.poll();
  EXPECT_GT(saturated_seconds(), 0);
}

TEST_F(PoolMonitorTest, APieIsReadAtItsLoadBias) {
  ASSERT_EQ(start({SONDE_FAKE_POOL}, "fake_pool"), PoolMonitor::Outcome::kTracked);
  monitor_.poll();
  const auto samples = monitor_.samples();
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].threads, 4u);
  EXPECT_EQ(samples[0].busy, 3u);
  EXPECT_EQ(samples[0].queued, 3u);  // two in wq around the marker, one slow I/O task
  const auto binaries = monitor_.binaries();
  ASSERT_EQ(binaries.size(), 1u);
  EXPECT_EQ(binaries[0].verdict, Verdict::kMeasured);
  EXPECT_EQ(binaries[0].processes, 1u);
  // It exits: its series stay (grace), its binary goes.
  const pid_t pid = child_->pid();
  child_.reset();
  monitor_.exited(pid, real_clock().now_ns());
  EXPECT_EQ(monitor_.tracked(), 0u);
  EXPECT_TRUE(monitor_.binaries().empty());
  EXPECT_EQ(monitor_.samples().size(), 1u);
}

TEST_F(PoolMonitorTest, BinariesWithoutLibuvsStaticsGetAVerdictAndAreNotRead) {
  const std::pair<const char*, Verdict> cases[] = {
      {SONDE_FAKE_POOL_NO_SLOW_QUEUE, Verdict::kSymbolsMissing},
      {SONDE_FAKE_POOL_TWIN_WQ, Verdict::kSymbolsAmbiguous},
      {SONDE_FAKE_POOL_SMALL_WQ, Verdict::kLayoutMismatch},
  };
  for (const auto& [path, verdict] : cases) {
    std::string why;
    EXPECT_EQ(start({path}, "fake_pool", &why), PoolMonitor::Outcome::kRefused) << path;
    EXPECT_NE(why.find(verdict_name(verdict)), std::string::npos) << why;
    const auto binaries = monitor_.binaries();
    ASSERT_EQ(binaries.size(), 1u);
    EXPECT_EQ(binaries[0].verdict, verdict);
    EXPECT_EQ(binaries[0].processes, 1u);
    monitor_.poll();
    EXPECT_EQ(monitor_.stats().readings, 0u);
    EXPECT_TRUE(monitor_.samples().empty());
    const pid_t pid = child_->pid();
    child_.reset();
    monitor_.exited(pid, real_clock().now_ns());
    EXPECT_TRUE(monitor_.binaries().empty());
  }
}

TEST_F(PoolMonitorTest, ProcessesPastTheBoundAreRefusedAndCounted) {
  PoolMonitor small(cache_, proc_, 1'000'000'000, real_clock(), 1);
  auto first = std::make_unique<ChildProcess>(std::vector<std::string>{SONDE_FAKE_POOL});
  auto second = std::make_unique<ChildProcess>(std::vector<std::string>{SONDE_FAKE_POOL});
  for (auto* c : {first.get(), second.get()}) ASSERT_TRUE(c->wait_for_line("ready", 10s));
  auto candidate = [&](pid_t pid) {
    auto info = proc_.read(pid);
    EXPECT_TRUE(info.ok());
    return std::move(open_candidate(proc_, *info, true)).value();
  };
  EXPECT_EQ(small.consider(candidate(first->pid()), labels_), PoolMonitor::Outcome::kTracked);
  std::string why;
  EXPECT_EQ(small.consider(candidate(second->pid()), labels_, &why),
            PoolMonitor::Outcome::kLimitExceeded);
  EXPECT_NE(why.find("at most 1 processes"), std::string::npos) << why;
  EXPECT_EQ(small.stats().limit_exceeded, 1u);
  EXPECT_EQ(small.tracked(), 1u);
}

TEST_F(PoolMonitorTest, AProcessThatExitsBetweenPollsIsNotAFailure) {
  ASSERT_EQ(start({SONDE_FAKE_POOL}, "fake_pool"), PoolMonitor::Outcome::kTracked);
  monitor_.poll();
  kill(child_->pid(), SIGKILL);
  child_->wait();
  monitor_.poll();  // its exit event has not come: the read finds no process
  const auto stats = monitor_.stats();
  EXPECT_EQ(stats.readings, 1u);
  for (uint64_t f : stats.failures) EXPECT_EQ(f, 0u);
  monitor_.sweep();
  EXPECT_EQ(monitor_.tracked(), 0u);
}

// The pid of a process that exited, given to another process before the agent hears of the
// exit: its memory must not be read as the old process's pool. Both run the same PIE with ASLR
// off (setarch -R), so the newcomer's pool sits at the very addresses the monitor holds: only
// the pidfd taken at consider() tells them apart. The kernel is asked for the old pid through
// ns_last_pid (the next fork gets the pid after it); another fork on the machine may take it
// first, then the test tries again.
TEST_F(PoolMonitorTest, APidGivenToAnotherProcessIsNotReadAsTheOldOne) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to choose the next pid (ns_last_pid)";
  const std::vector<std::string> argv = {"/usr/bin/setarch", "-R", SONDE_FAKE_POOL};
  ASSERT_EQ(start(argv, "fake_pool"), PoolMonitor::Outcome::kTracked);
  const std::string first_line = child_->last_line();
  monitor_.poll();
  ASSERT_EQ(monitor_.stats().readings, 1u);
  const pid_t pid = child_->pid();
  kill(pid, SIGKILL);
  child_->wait();

  std::unique_ptr<ChildProcess> newcomer;
  for (int attempt = 0; attempt < 50 && !newcomer; ++attempt) {
    std::ofstream("/proc/sys/kernel/ns_last_pid") << pid - 1;
    auto c = std::make_unique<ChildProcess>(argv);
    if (c->pid() == pid) newcomer = std::move(c);
  }
  ASSERT_TRUE(newcomer) << "pid " << pid << " was never given to the newcomer";
  ASSERT_TRUE(newcomer->wait_for_line("ready", 10s));
  ASSERT_EQ(newcomer->last_line(), first_line) << "its pool is not at the same address";

  monitor_.poll();  // the exit event has not come
  const auto stats = monitor_.stats();
  EXPECT_EQ(stats.readings, 1u) << "the newcomer's pool was read as the exited process's";
  for (uint64_t f : stats.failures) EXPECT_EQ(f, 0u);
  monitor_.sweep();  // another start time under the pid: the old process is finished
  EXPECT_EQ(monitor_.tracked(), 0u);
}

}  // namespace
}  // namespace sonde::agent::threadpool
