// Needs root and the real kernel (ctest label: bpf).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <vector>

#include "agent/procevents/process_events.h"

namespace sonde::agent {
namespace {

TEST(ProcessEventsBpf, SeesExecAndExitOfAChild) {
  std::vector<ProcessEvent> events;
  auto source = ProcessEventSource::start([&](const ProcessEvent& e) { events.push_back(e); });
  ASSERT_TRUE(source.ok()) << source.error().message();

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", "exit 3", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 3);

  std::optional<ProcessEvent> exec, exit;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!exec || !exit) && std::chrono::steady_clock::now() < deadline) {
    auto n = (*source)->poll(100);
    ASSERT_TRUE(n.ok()) << n.error().message();
    for (const auto& e : events) {
      if (e.pid != static_cast<uint32_t>(child)) continue;
      if (e.kind == ProcessEvent::Kind::kExec) exec = e;
      if (e.kind == ProcessEvent::Kind::kExit) exit = e;
    }
  }
  ASSERT_TRUE(exec.has_value()) << "no exec event for pid " << child;
  ASSERT_TRUE(exit.has_value()) << "no exit event for pid " << child;
  EXPECT_EQ(exec->filename, "/bin/sh");
  EXPECT_EQ(exec->comm, "sh");
  EXPECT_EQ(exec->ppid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(exit->comm, "sh");
  EXPECT_EQ(exit->exit_code, static_cast<uint32_t>(status));
  EXPECT_LE(exec->timestamp_ns, exit->timestamp_ns);
  EXPECT_EQ((*source)->dropped(), 0u);
}

}  // namespace
}  // namespace sonde::agent
