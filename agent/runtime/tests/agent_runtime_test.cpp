// AgentRuntime with fake parts: process events the test sends, three fake features (two that
// read the executable on the inspection worker, one that answers on the event thread, like the
// Node.js, Go TLS and CPU features) and a clock the test moves. What is tested is what the
// runtime decides: which feature sees which process and when, what it records as outcomes, and
// what /metrics serves. The processes are real children of the test, read through the real
// /proc (their executables are opened as the agent opens them). No BPF.
#include "agent/runtime/agent_runtime.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "agent/tests/cgroup2_root.h"
#include "agent/tests/child_process.h"
#include "agent/tests/http_get.h"
#include "common/testing/manual_clock.h"
#include "common/version.h"

namespace sonde::agent {
namespace {

using sonde::testing::ChildProcess;
using State = ProcessOutcome::State;
using namespace std::chrono_literals;

constexpr uint64_t kSweepIntervalNs = 10'000'000'000;  // the runtime's

// Process events the test sends; delivered by poll() on run()'s thread.
class FakeEvents final : public ProcessEvents {
 public:
  explicit FakeEvents(Callback callback) : callback_(std::move(callback)) {}

  Result<int> poll(int timeout_ms) override {
    std::deque<ProcessEvent> batch;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !queue_.empty(); });
      batch.swap(queue_);
      polls_++;
    }
    for (const auto& e : batch) callback_(e);
    return static_cast<int>(batch.size());
  }
  uint64_t dropped() const override { return dropped_.load(); }

  void send(ProcessEvent e) {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(e));
    cv_.notify_all();
  }
  void set_dropped(uint64_t n) { dropped_.store(n); }
  uint64_t polls() const {
    std::lock_guard lock(mu_);
    return polls_;
  }

 private:
  Callback callback_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ProcessEvent> queue_;
  uint64_t polls_ = 0;
  std::atomic<uint64_t> dropped_{0};
};

// A feature that records what the runtime asks of it and answers what the test set.
class FakeFeature final : public Feature {
 public:
  struct Call {
    bool on_worker;  // instrument() (else select())
    pid_t pid;
    bool running;  // for instrument(): found by a scan, not at its exec
    std::string exe;
  };

  // `label` names its metric; the runtime knows it by `kind` only.
  FakeFeature(const char* label, Instrumentation kind, bool on_worker)
      : name_(label), kind_(kind), on_worker_(on_worker) {}

  Instrumentation kind() const override { return kind_; }
  const std::vector<std::string>& symbol_names() const override { return names_; }

  std::optional<FeatureResult> select(const ProcessInfo& process, const Selection&) override {
    std::lock_guard lock(mu_);
    selected_.push_back(process);
    if (on_worker_) return std::nullopt;
    calls_.push_back({false, process.pid, false, process.exe});
    return answer_locked(process.pid);
  }
  FeatureResult instrument(const Candidate& c, const Selection&) override {
    std::shared_future<void> gate;
    {
      std::lock_guard lock(mu_);
      calls_.push_back({true, c.info.pid, c.running, c.info.exe});
      if (c.info.pid == held_) gate = gate_;
    }
    if (gate.valid()) gate.wait();
    std::lock_guard lock(mu_);
    return answer_locked(c.info.pid);
  }
  void release(pid_t pid, uint64_t end_ns) override {
    std::lock_guard lock(mu_);
    releases_.emplace_back(pid, end_ns);
    tracked_.erase(pid);
  }
  void sweep() override {
    std::lock_guard lock(mu_);
    sweeps_++;
  }
  std::vector<std::pair<pid_t, FeatureResult>> take_revisions() override {
    std::lock_guard lock(mu_);
    return std::exchange(revisions_, {});
  }
  // take_revisions() (after the next sweep) answers that pid's outcome is now `r`.
  void revise(pid_t pid, FeatureResult r) {
    std::lock_guard lock(mu_);
    revisions_.emplace_back(pid, std::move(r));
  }
  size_t tracked() const override {
    std::lock_guard lock(mu_);
    return tracked_.size();
  }
  void collect(std::vector<prometheus::MetricFamily>& out) override {
    auto f = gauge_family(std::string("fake_") + name_ + "_tracked", "Processes tracked.");
    add_sample(f, {}, static_cast<double>(tracked()));
    out.push_back(std::move(f));
  }
  void add_routes(MetricsServer& server) override {
    server.add_route(std::string("/debug/fake_") + name_, [](const HttpRequest&) {
      return HttpResponse{.status = 200, .body = "profile\n"};
    });
  }

  // instrument() of `pid` records its call, then waits until the returned promise is set.
  std::promise<void> hold(pid_t pid) {
    std::lock_guard lock(mu_);
    std::promise<void> go;
    held_ = pid;
    gate_ = go.get_future().share();
    return go;
  }
  // What the feature answers for pid (kInstrumented unless set).
  void answer(pid_t pid, FeatureResult r) {
    std::lock_guard lock(mu_);
    answers_[pid] = std::move(r);
  }
  std::vector<Call> calls_for(pid_t pid) const {
    std::lock_guard lock(mu_);
    std::vector<Call> out;
    for (const auto& c : calls_) {
      if (c.pid == pid) out.push_back(c);
    }
    return out;
  }
  // What select() was told of pid, every time.
  std::vector<ProcessInfo> selects_of(pid_t pid) const {
    std::lock_guard lock(mu_);
    std::vector<ProcessInfo> out;
    for (const auto& p : selected_) {
      if (p.pid == pid) out.push_back(p);
    }
    return out;
  }
  std::vector<uint64_t> releases_of(pid_t pid) const {
    std::lock_guard lock(mu_);
    std::vector<uint64_t> out;
    for (const auto& [p, at] : releases_) {
      if (p == pid) out.push_back(at);
    }
    return out;
  }
  int sweeps() const {
    std::lock_guard lock(mu_);
    return sweeps_;
  }

 private:
  FeatureResult answer_locked(pid_t pid) {
    FeatureResult r{.state = State::kInstrumented};
    if (auto it = answers_.find(pid); it != answers_.end()) r = it->second;
    if (r.state == State::kInstrumented) tracked_.insert(pid);
    return r;
  }

  const char* const name_;
  const Instrumentation kind_;
  const bool on_worker_;
  const std::vector<std::string> names_ = {"main"};
  mutable std::mutex mu_;
  std::vector<Call> calls_;
  std::vector<ProcessInfo> selected_;
  std::vector<std::pair<pid_t, uint64_t>> releases_;
  std::map<pid_t, FeatureResult> answers_;
  std::set<pid_t> tracked_;
  std::vector<std::pair<pid_t, FeatureResult>> revisions_;
  int sweeps_ = 0;
  pid_t held_ = 0;
  std::shared_future<void> gate_;
};

// Selects the pids the test names.
class FakeSelector final : public Selector {
 public:
  std::optional<Selection> select(const ProcessInfo& process) override {
    std::lock_guard lock(mu_);
    names_[process.pid].push_back(process.comm);
    auto it = selections_.find(process.pid);
    if (it == selections_.end()) return std::nullopt;
    return it->second;
  }
  void set(pid_t pid, std::optional<Selection> s) {
    std::lock_guard lock(mu_);
    if (s) {
      selections_[pid] = *s;
    } else {
      selections_.erase(pid);
    }
  }
  // The names the runtime gave pid's process, one per select() call.
  std::vector<std::string> names(pid_t pid) {
    std::lock_guard lock(mu_);
    return names_[pid];
  }

 private:
  std::mutex mu_;
  std::map<pid_t, Selection> selections_;
  std::map<pid_t, std::vector<std::string>> names_;
};

Selection selection(bool nodejs, bool go_tls, bool cpu, const std::string& pod = "web") {
  Selection s;
  auto ask = [&](Instrumentation kind, bool on) {
    if (on) s.instrumentations[kind] = default_params(kind);
  };
  ask(Instrumentation::kNodejsEventLoop, nodejs);
  ask(Instrumentation::kGoTls, go_tls);
  ask(Instrumentation::kCpu, cpu);
  s.labels = {"shop", pod, "main"};
  return s;
}

std::string exe_of(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

// Polls `done` until it holds or 20 s pass (a deadline for a broken runtime, not a timing).
template <typename F>
bool eventually(F done) {
  for (auto deadline = std::chrono::steady_clock::now() + 20s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(5ms)) {
    if (done()) return true;
  }
  return done();
}

class AgentRuntimeTest : public ::testing::Test {
 protected:
  // Starts the runtime with the fakes; run() starts separately (what it scans at start matters).
  void start(std::string debug_address = "") {
    RuntimeOptions options;
    options.metrics_address = "127.0.0.1:0";
    options.debug_address = std::move(debug_address);
    options.node_name = "test-node";
    auto rt = AgentRuntime::start(
        options, selector_,
        [this](const RuntimeServices& s) -> Result<RuntimeParts> {
          RuntimeParts parts;
          auto events = std::make_unique<FakeEvents>(s.on_event);
          events_ = events.get();
          parts.events = std::move(events);
          auto add = [&](const char* label, Instrumentation kind, bool on_worker) {
            auto f = std::make_unique<FakeFeature>(label, kind, on_worker);
            features_.push_back(f.get());
            parts.features.push_back(std::move(f));
          };
          add("a", Instrumentation::kNodejsEventLoop, true);
          add("b", Instrumentation::kGoTls, true);
          add("c", Instrumentation::kCpu, false);
          parts.info_labels = {{"wait_source", "fake-hook"}};
          return parts;
        },
        clock_);
    ASSERT_TRUE(rt.ok()) << rt.error().message();
    runtime_ = std::move(*rt);
  }
  void run() {
    runner_ = std::thread([this] { run_status_ = runtime_->run(stop_); });
  }
  void TearDown() override {
    if (runner_.joinable()) {
      EXPECT_EQ(raise(SIGTERM), 0);  // StopSignals turns it into the stop request
      runner_.join();
      EXPECT_TRUE(run_status_.ok()) << run_status_.error().message();
    }
  }

  std::optional<ProcessOutcome> outcome(pid_t pid) const {
    for (auto& o : runtime_->outcomes()) {
      if (o.pid == pid) return o;
    }
    return std::nullopt;
  }
  // Waits until the runtime has gone round its loop a few more times (it answered every event
  // queued before this call, and whatever a loop decides was decided).
  void settle() {
    const uint64_t polls = events_->polls();
    ASSERT_TRUE(eventually([&] { return events_->polls() >= polls + 3; }));
  }
  FakeFeature& a() { return *features_[0]; }
  FakeFeature& b() { return *features_[1]; }
  FakeFeature& c() { return *features_[2]; }

  ::sonde::testing::ManualClock clock_;
  FakeSelector selector_;
  StopSignals stop_;
  std::unique_ptr<AgentRuntime> runtime_;
  FakeEvents* events_ = nullptr;
  std::vector<FakeFeature*> features_;
  std::thread runner_;
  Status run_status_ = ok_status();
};

TEST_F(AgentRuntimeTest, EachRequestedFeatureConsidersASelectedProcessOnce) {
  ChildProcess selected({"/bin/sleep", "1000"});
  ChildProcess cpu_only({"/bin/sleep", "1000"});
  ChildProcess unselected({"/bin/sleep", "1000"});
  selector_.set(selected.pid(), selection(true, true, true));
  selector_.set(cpu_only.pid(), selection(false, false, true, "batch"));
  start();
  run();
  ASSERT_TRUE(eventually([&] { return outcome(selected.pid()) && outcome(cpu_only.pid()); }));
  settle();

  // Found by the start-up scan: the executable-reading features on the worker, with the file
  // opened as the process runs it; the CPU-like feature on the event thread.
  for (FakeFeature* f : {&a(), &b()}) {
    auto calls = f->calls_for(selected.pid());
    ASSERT_EQ(calls.size(), 1u) << f->name();
    EXPECT_TRUE(calls[0].on_worker);
    EXPECT_TRUE(calls[0].running);
    EXPECT_EQ(calls[0].exe, exe_of(selected.pid()));
    EXPECT_TRUE(f->calls_for(cpu_only.pid()).empty()) << f->name();
  }
  ASSERT_EQ(c().calls_for(selected.pid()).size(), 1u);
  EXPECT_FALSE(c().calls_for(selected.pid())[0].on_worker);
  EXPECT_EQ(c().calls_for(cpu_only.pid()).size(), 1u);
  for (FakeFeature* f : features_) EXPECT_TRUE(f->calls_for(unselected.pid()).empty());
  EXPECT_FALSE(outcome(unselected.pid()));

  auto o = *outcome(selected.pid());
  EXPECT_EQ(o.states[Instrumentation::kNodejsEventLoop], State::kInstrumented);
  EXPECT_EQ(o.states[Instrumentation::kGoTls], State::kInstrumented);
  EXPECT_EQ(o.states[Instrumentation::kCpu], State::kInstrumented);
  EXPECT_EQ(o.labels.pod, "web");
  EXPECT_EQ(o.exe, exe_of(selected.pid()));
  EXPECT_TRUE(o.message.empty());
  auto batch = *outcome(cpu_only.pid());
  EXPECT_EQ(batch.states[Instrumentation::kNodejsEventLoop], State::kNotApplicable);
  EXPECT_EQ(batch.states[Instrumentation::kGoTls], State::kNotApplicable);
  EXPECT_EQ(batch.states[Instrumentation::kCpu], State::kInstrumented);
}

TEST_F(AgentRuntimeTest, OneFeatureFailingOnOneProcessLeavesTheOthersInstrumented) {
  ChildProcess p1({"/bin/sleep", "1000"});
  ChildProcess p2({"/bin/sleep", "1000"});
  selector_.set(p1.pid(), selection(true, true, true));
  selector_.set(p2.pid(), selection(true, true, true));
  start();
  a().answer(p1.pid(), {.state = State::kFailed, .message = "a: the kernel refused"});
  b().answer(p1.pid(), {.state = State::kSymbolsNotFound, .message = "b: no such symbol"});
  run();
  ASSERT_TRUE(eventually([&] { return outcome(p1.pid()) && outcome(p2.pid()); }));

  auto o1 = *outcome(p1.pid());
  EXPECT_EQ(o1.states[Instrumentation::kNodejsEventLoop], State::kFailed);
  EXPECT_EQ(o1.states[Instrumentation::kGoTls],
            State::kSymbolsNotFound);  // tried after a's failure
  EXPECT_EQ(o1.states[Instrumentation::kCpu], State::kInstrumented);
  EXPECT_EQ(o1.message, "a: the kernel refused");  // the first problem, in feature order
  auto o2 = *outcome(p2.pid());
  EXPECT_EQ(o2.states[Instrumentation::kNodejsEventLoop],
            State::kInstrumented);  // a still instruments other processes
  EXPECT_EQ(o2.states[Instrumentation::kGoTls], State::kInstrumented);
  EXPECT_EQ(o2.states[Instrumentation::kCpu], State::kInstrumented);
  EXPECT_TRUE(o2.message.empty());
  EXPECT_EQ(a().tracked(), 1u);
  EXPECT_EQ(b().tracked(), 1u);
  EXPECT_EQ(c().tracked(), 2u);
}

TEST_F(AgentRuntimeTest, AProcessGoneDuringInspectionGetsNoOutcome) {
  ChildProcess p({"/bin/sleep", "1000"});
  selector_.set(p.pid(), selection(true, true, false));
  start();
  a().answer(p.pid(), {.gone = true});
  run();
  ASSERT_TRUE(eventually([&] { return !a().calls_for(p.pid()).empty(); }));
  settle();
  EXPECT_FALSE(outcome(p.pid()));
  EXPECT_TRUE(b().calls_for(p.pid()).empty());  // not worth asking once it is gone
}

TEST_F(AgentRuntimeTest, AnExitReleasesTheProcessFromEveryFeatureAtItsExitTime) {
  auto p = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sleep", "1000"});
  const pid_t pid = p->pid();
  ChildProcess other({"/bin/sleep", "1000"});
  selector_.set(pid, selection(true, true, true));
  start();
  run();
  ASSERT_TRUE(eventually([&] { return outcome(pid).has_value(); }));
  p.reset();  // killed and reaped
  events_->send({.kind = ProcessEvent::Kind::kExit,
                 .pid = static_cast<uint32_t>(pid),
                 .timestamp_ns = 123'456'789});
  ASSERT_TRUE(eventually([&] { return !outcome(pid); }));
  for (FakeFeature* f : features_) {
    EXPECT_EQ(f->releases_of(pid), std::vector<uint64_t>{123'456'789}) << f->name();
    EXPECT_EQ(f->tracked(), 0u) << f->name();
  }
  // An exit of a process the runtime never selected still reaches every feature, which may have
  // kernel state of it (counted from its first call): releasing the untracked is theirs to skip.
  events_->send({.kind = ProcessEvent::Kind::kExit,
                 .pid = static_cast<uint32_t>(other.pid()),
                 .timestamp_ns = 5});
  settle();
  for (FakeFeature* f : features_) EXPECT_EQ(f->releases_of(other.pid()).size(), 1u);
}

// A process whose instrumentation was refused stays among the outcomes for a minute after its
// exit, so that a report written meanwhile still names why a container of short-lived processes
// is not instrumented (a condition would otherwise come and go with each process); an
// instrumented one leaves at its exit.
TEST_F(AgentRuntimeTest, AProcessThatExitedWithAProblemStaysAnOutcomeForAMinute) {
  auto refused = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sleep", "1000"});
  auto fine = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sleep", "1000"});
  const pid_t refused_pid = refused->pid();
  const pid_t fine_pid = fine->pid();
  selector_.set(refused_pid, selection(false, true, false));
  selector_.set(fine_pid, selection(false, true, false));
  start();
  b().answer(refused_pid, {.state = State::kLimitExceeded, .message = "b: over the limit"});
  run();
  ASSERT_TRUE(eventually([&] { return outcome(refused_pid) && outcome(fine_pid); }));
  refused.reset();
  fine.reset();
  for (pid_t pid : {refused_pid, fine_pid}) {
    events_->send({.kind = ProcessEvent::Kind::kExit,
                   .pid = static_cast<uint32_t>(pid),
                   .timestamp_ns = clock_.now_ns()});
  }
  ASSERT_TRUE(eventually([&] { return !outcome(fine_pid); }));
  settle();
  auto o = outcome(refused_pid);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->states[Instrumentation::kGoTls], State::kLimitExceeded);
  EXPECT_EQ(o->message, "b: over the limit");
  clock_.advance_ns(59'000'000'000);
  EXPECT_TRUE(outcome(refused_pid));
  clock_.advance_ns(1'000'000'000);
  EXPECT_FALSE(outcome(refused_pid));
}

// A short-lived program that exited before its exec event was handled: /proc has nothing of it,
// so it is selected from the event (its exe as exec'd, its comm, its cgroup v2's container), each
// requested feature's select() sees it (a kernel probe may have counted it from its first call,
// its exit folds that), nothing is inspected and no outcome stays. A process whose cgroup cannot
// be named is not selected: its container could not be told.
TEST_F(AgentRuntimeTest, AProcessGoneBeforeItsExecIsHandledIsSelectedFromTheEvent) {
  const std::string root = ::sonde::testing::cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  if (geteuid() != 0) GTEST_SKIP() << "naming a cgroup by its id needs CAP_DAC_READ_SEARCH";
  const std::string cgroup = "/sonde-runtime-test-" + std::to_string(getpid()) +
                             "/cri-containerd-" + std::string(64, 'c') + ".scope";
  std::filesystem::create_directories(root + cgroup);
  struct Removed {  // also when an assertion ends the test: a cgroup outlives its test
    std::string leaf, parent;
    ~Removed() {
      (void)rmdir(leaf.c_str());
      (void)rmdir(parent.c_str());
    }
  } removed{root + cgroup, root + cgroup.substr(0, cgroup.rfind('/'))};
  struct stat st {};
  ASSERT_EQ(stat((root + cgroup).c_str(), &st), 0);
  const uint64_t cgroup_id = st.st_ino;  // a cgroup's id is its directory's inode
  constexpr pid_t kGone = 4'000'000;     // above PID_MAX_LIMIT: no process has it
  constexpr pid_t kNoCgroup = 4'000'001;
  selector_.set(kGone, selection(false, true, true));
  selector_.set(kNoCgroup, selection(false, true, true));
  start();
  run();
  events_->send({.kind = ProcessEvent::Kind::kExec,
                 .pid = static_cast<uint32_t>(kGone),
                 .timestamp_ns = 7,
                 .cgroup_id = cgroup_id,
                 .comm = "short",
                 .filename = "/opt/bin/short"});
  events_->send({.kind = ProcessEvent::Kind::kExec,
                 .pid = static_cast<uint32_t>(kNoCgroup),
                 .timestamp_ns = 8,
                 .cgroup_id = 1ULL << 62,
                 .comm = "short",
                 .filename = "/opt/bin/short"});
  events_->send(
      {.kind = ProcessEvent::Kind::kExit, .pid = static_cast<uint32_t>(kGone), .timestamp_ns = 9});
  ASSERT_TRUE(eventually([&] { return b().releases_of(kGone).size() == 1; }));
  settle();
  for (FakeFeature* f : {&b(), &c()}) {
    const auto seen = f->selects_of(kGone);
    ASSERT_EQ(seen.size(), 1u) << f->name();
    EXPECT_EQ(seen[0].exe, "/opt/bin/short");
    EXPECT_EQ(seen[0].comm, "short");
    EXPECT_EQ(seen[0].container_id, std::string(64, 'c'));
    EXPECT_EQ(seen[0].start_time, 0u);
    EXPECT_EQ(seen[0].exec_ns, 7u);
    EXPECT_TRUE(f->selects_of(kNoCgroup).empty()) << f->name();
  }
  EXPECT_TRUE(a().selects_of(kGone).empty());  // not requested
  EXPECT_TRUE(b().calls_for(kGone).empty());   // nothing inspected
  EXPECT_EQ(b().releases_of(kGone), std::vector<uint64_t>{9});
  EXPECT_FALSE(outcome(kGone));
  EXPECT_FALSE(outcome(kNoCgroup));
}

// The exit event is handled on the event thread while the worker is still instrumenting: what
// the worker instruments after that is released by the worker, and no outcome stays behind for
// a process that is gone (it would be reported as instrumented, and its probes kept).
TEST_F(AgentRuntimeTest, AnExitDuringInstrumentationIsReleasedAfterIt) {
  auto p = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sleep", "1000"});
  const pid_t pid = p->pid();
  selector_.set(pid, selection(true, false, false));
  start();
  std::promise<void> go = a().hold(pid);
  run();
  ASSERT_TRUE(eventually([&] { return !a().calls_for(pid).empty(); }));  // in instrument()
  p.reset();
  events_->send(
      {.kind = ProcessEvent::Kind::kExit, .pid = static_cast<uint32_t>(pid), .timestamp_ns = 42});
  ASSERT_TRUE(eventually([&] { return a().releases_of(pid).size() == 1; }));
  go.set_value();
  ASSERT_TRUE(eventually([&] { return a().releases_of(pid).size() == 2; }));
  settle();
  EXPECT_EQ(a().releases_of(pid), (std::vector<uint64_t>{42, 42}));  // both at its exit time
  EXPECT_EQ(a().tracked(), 0u);
  EXPECT_FALSE(outcome(pid));
}

TEST_F(AgentRuntimeTest, AnExecIsConsideredAgainWithTheNewProgram) {
  const std::string go = ::testing::TempDir() + "/exec-now-" + std::to_string(getpid());
  std::filesystem::remove(go);
  ChildProcess p(
      {"/bin/sh", "-c", "while [ ! -e '" + go + "' ]; do sleep 0.02; done; exec /bin/sleep 1000"});
  selector_.set(p.pid(), selection(true, false, true));
  start();
  run();
  ASSERT_TRUE(eventually([&] { return outcome(p.pid()).has_value(); }));
  const std::string shell = exe_of(p.pid());
  ASSERT_EQ(a().calls_for(p.pid()).size(), 1u);
  EXPECT_EQ(a().calls_for(p.pid())[0].exe, shell);

  { std::ofstream(go) << "go"; }
  ASSERT_TRUE(eventually([&] { return exe_of(p.pid()) != shell; }));
  events_->send({.kind = ProcessEvent::Kind::kExec, .pid = static_cast<uint32_t>(p.pid())});
  ASSERT_TRUE(eventually([&] { return a().calls_for(p.pid()).size() == 2; }));
  auto again = a().calls_for(p.pid())[1];
  EXPECT_FALSE(again.running);  // seen at its exec: from its first instruction
  EXPECT_EQ(again.exe, exe_of(p.pid()));
  EXPECT_NE(again.exe, shell);
  EXPECT_EQ(c().calls_for(p.pid()).size(), 2u);
  EXPECT_TRUE(b().calls_for(p.pid()).empty());  // not requested
  ASSERT_TRUE(eventually([&] {
    auto o = outcome(p.pid());
    return o && o->exe == exe_of(p.pid());
  }));
  std::filesystem::remove(go);
}

TEST_F(AgentRuntimeTest, ReselectionInstrumentsTheNewlySelectedAndReleasesTheDeselected) {
  ChildProcess p1({"/bin/sleep", "1000"});
  ChildProcess p2({"/bin/sleep", "1000"});
  selector_.set(p1.pid(), selection(true, true, false));
  start();
  run();
  ASSERT_TRUE(eventually([&] { return outcome(p1.pid()).has_value(); }));
  settle();
  EXPECT_FALSE(outcome(p2.pid()));  // nothing asked the runtime to look again

  // p1 keeps b only; p2 becomes selected.
  clock_.advance_ns(7);
  const uint64_t at = clock_.now_ns();
  selector_.set(p1.pid(), selection(false, true, false));
  selector_.set(p2.pid(), selection(true, false, false));
  runtime_->request_reselect();
  ASSERT_TRUE(eventually([&] { return outcome(p2.pid()).has_value(); }));
  ASSERT_TRUE(eventually([&] {
    auto o = outcome(p1.pid());
    return o && o->states[Instrumentation::kNodejsEventLoop] == State::kNotApplicable;
  }));
  EXPECT_EQ(a().releases_of(p1.pid()), std::vector<uint64_t>{at});  // released now
  EXPECT_TRUE(b().releases_of(p1.pid()).empty());
  EXPECT_EQ(b().calls_for(p1.pid()).size(), 2u);  // asked again: it recognizes the process
  EXPECT_EQ(a().calls_for(p2.pid()).size(), 1u);
  EXPECT_TRUE(a().calls_for(p2.pid())[0].running);

  // Deselected entirely: released by the features that had it, no outcome left.
  selector_.set(p1.pid(), std::nullopt);
  runtime_->request_reselect();
  ASSERT_TRUE(eventually([&] { return !outcome(p1.pid()); }));
  EXPECT_EQ(b().releases_of(p1.pid()).size(), 1u);
  EXPECT_EQ(b().tracked(), 0u);
  EXPECT_EQ(a().tracked(), 1u);  // p2
}

// Standalone mode labels a host process with its name. A program may rename its main thread
// soon after exec (Node 24 names it MainThread, and /proc then says so): the name the kernel
// gave it at exec, which its exec event carries, is what the selector sees for as long as it
// runs, rescans included.
TEST_F(AgentRuntimeTest, AProcessKeepsTheNameItHadAtExec) {
  ChildProcess p({"/bin/sleep", "1000"});  // exec'd on return: /proc names it "sleep"
  selector_.set(p.pid(), selection(true, false, false));
  start();
  run();
  ASSERT_TRUE(eventually([&] { return outcome(p.pid()).has_value(); }));
  settle();
  events_->send({.kind = ProcessEvent::Kind::kExec,
                 .pid = static_cast<uint32_t>(p.pid()),
                 .comm = "web-server"});
  ASSERT_TRUE(eventually([&] { return selector_.names(p.pid()).size() >= 2; }));
  runtime_->request_reselect();
  ASSERT_TRUE(eventually([&] { return selector_.names(p.pid()).size() >= 3; }));
  const auto names = selector_.names(p.pid());
  EXPECT_EQ(names.front(), "sleep") << "found by the scan: no exec seen, /proc's name";
  for (size_t i = 1; i < names.size(); ++i) EXPECT_EQ(names[i], "web-server") << i;

  // Deselected and selected again: the name is forgotten with the selection.
  selector_.set(p.pid(), std::nullopt);
  runtime_->request_reselect();
  ASSERT_TRUE(eventually([&] { return !outcome(p.pid()); }));
  selector_.set(p.pid(), selection(true, false, false));
  runtime_->request_reselect();
  ASSERT_TRUE(eventually([&] { return outcome(p.pid()).has_value(); }));
  EXPECT_EQ(selector_.names(p.pid()).back(), "sleep");
}

TEST_F(AgentRuntimeTest, LostExecEventsAreMadeUpForByARescan) {
  start();
  run();
  settle();
  ChildProcess late({"/bin/sleep", "1000"});  // started after the scan; its exec event is lost
  selector_.set(late.pid(), selection(true, false, false));
  settle();
  EXPECT_FALSE(outcome(late.pid()));
  events_->set_dropped(3);
  ASSERT_TRUE(eventually([&] { return outcome(late.pid()).has_value(); }));
  EXPECT_EQ(a().calls_for(late.pid()).size(), 1u);
}

TEST_F(AgentRuntimeTest, EveryFeatureIsSweptAtTheSweepInterval) {
  start();
  run();
  settle();
  clock_.advance_ns(kSweepIntervalNs - 1);
  settle();
  for (FakeFeature* f : features_) EXPECT_EQ(f->sweeps(), 0) << f->name();
  clock_.advance_ns(1);
  ASSERT_TRUE(eventually([&] { return c().sweeps() == 1; }));
  for (FakeFeature* f : features_) EXPECT_EQ(f->sweeps(), 1) << f->name();
  clock_.advance_ns(kSweepIntervalNs);
  ASSERT_TRUE(eventually([&] { return c().sweeps() == 2; }));
  EXPECT_EQ(a().sweeps(), 2);
}

// A feature that stops instrumenting a process on its own (Go TLS over its overhead budget)
// says so after a sweep: that feature's state in the recorded outcome changes, with its
// message; the other features' states stay, and a revision of an unknown pid is dropped.
TEST_F(AgentRuntimeTest, AFeaturesRevisionsAfterASweepReplaceItsStateInTheOutcome) {
  ChildProcess p({"/bin/sleep", "1000"});
  selector_.set(p.pid(), selection(true, false, true));
  start();
  run();
  ASSERT_TRUE(eventually([&] {
    auto o = outcome(p.pid());
    return o && o->states[c().kind()] == State::kInstrumented &&
           o->states[a().kind()] == State::kInstrumented;
  }));
  c().revise(p.pid(), {State::kOverheadExceeded, "probes detached: 43% (limit 1%)"});
  c().revise(p.pid() + 100000, {State::kOverheadExceeded, "nobody"});
  settle();
  EXPECT_EQ(outcome(p.pid())->states[c().kind()], State::kInstrumented) << "not before a sweep";
  clock_.advance_ns(kSweepIntervalNs);
  ASSERT_TRUE(
      eventually([&] { return outcome(p.pid())->states[c().kind()] == State::kOverheadExceeded; }));
  EXPECT_EQ(outcome(p.pid())->message, "probes detached: 43% (limit 1%)");
  EXPECT_EQ(outcome(p.pid())->states[a().kind()], State::kInstrumented);
  EXPECT_FALSE(outcome(p.pid() + 100000));
}

TEST_F(AgentRuntimeTest, MetricsHoldEveryFeaturesFamiliesAndTheRuntimesOwn) {
  ChildProcess p({"/bin/sleep", "1000"});
  selector_.set(p.pid(), selection(true, false, true));
  start();
  run();
  ASSERT_TRUE(eventually([&] { return outcome(p.pid()).has_value(); }));
  events_->set_dropped(2);
  auto r = sonde::testing::http_get(runtime_->metrics_port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\nfake_a_tracked 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\nfake_b_tracked 0\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\nfake_c_tracked 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\nsonde_agent_process_events_dropped_total 2\n"), std::string::npos);
  EXPECT_NE(r.body.find("\nsonde_agent_info{version=\"" + std::string(kVersion) +
                        "\",wait_source=\"fake-hook\"} 1\n"),
            std::string::npos)
      << r.body;
  // Every feature's symbols are resolved in one parse of the executable.
  EXPECT_NE(r.body.find("\nsonde_agent_symbol_cache_parses_total 1\n"), std::string::npos)
      << r.body;
}

// The /debug/ routes on an address of their own (e.g. the pod's loopback): served there, and no
// more on the metrics port, which keeps /metrics and the probes.
TEST_F(AgentRuntimeTest, DebugRoutesMoveToTheirOwnAddress) {
  start();
  EXPECT_EQ(runtime_->debug_port(), runtime_->metrics_port());
  EXPECT_EQ(sonde::testing::http_get(runtime_->metrics_port(), "/debug/fake_c").status, 200);
  runtime_.reset();
  start("127.0.0.1:0");
  ASSERT_NE(runtime_->debug_port(), runtime_->metrics_port());
  auto r = sonde::testing::http_get(runtime_->debug_port(), "/debug/fake_c");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "profile\n");
  EXPECT_EQ(sonde::testing::http_get(runtime_->metrics_port(), "/debug/fake_c").status, 404);
  EXPECT_EQ(sonde::testing::http_get(runtime_->metrics_port(), "/metrics").status, 200);
  EXPECT_NE(sonde::testing::http_get(runtime_->metrics_port(), "/healthz").status, 404);
}

TEST_F(AgentRuntimeTest, AFailingPartsFactoryFailsTheStart) {
  RuntimeOptions options;
  options.metrics_address = "127.0.0.1:0";
  auto rt = AgentRuntime::start(
      options, selector_,
      [](const RuntimeServices&) -> Result<RuntimeParts> { return Error("no BPF here"); }, clock_);
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.error().message().find("no BPF here"), std::string::npos);
}

}  // namespace
}  // namespace sonde::agent
