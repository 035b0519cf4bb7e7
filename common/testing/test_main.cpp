// The main() of every sonde test binary (sonde_test in CMakeLists.txt): GoogleTest's, plus a
// watchdog for the time after the last test.
//
// A test binary that passes its tests and then does not exit (a library's thread pool joined at
// exit, the sanitizers' exit-time work) is killed by ctest at its timeout with nothing to say
// where it hung. So once the tests have run, a small shell is started that waits for this
// process to exit (it reads a pipe only this process holds); if the process is still there
// kExitDeadlineSeconds later, the shell prints every thread's stack (gdb, or the kernel's view
// from /proc when gdb is absent) to the test's output and aborts the process, which fails the
// test with the evidence in its log.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <unistd.h>

#include <string>

extern char** environ;

namespace {

constexpr int kExitDeadlineSeconds = 60;

void watch_exit() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  const std::string pid = std::to_string(getpid());
  const std::string deadline = std::to_string(kExitDeadlineSeconds);
  // $1: this process, $2: the deadline in seconds; stdin: the pipe.
  const char* script = R"sh(timeout "$2" cat >/dev/null && exit 0
echo "=== test process $1 has not exited $2 s after its last test; its threads:" >&2
if command -v gdb >/dev/null; then
  gdb -p "$1" -batch -ex 'thread apply all bt' </dev/null >&2 2>&1
else
  for t in /proc/$1/task/*; do
    echo "--- thread ${t##*/} $(cat $t/comm) wchan=$(cat $t/wchan) syscall=$(cat $t/syscall)"
    cat "$t/stack"
  done >&2
fi
kill -ABRT "$1"
)sh";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  const char* argv[] = {"sh", "-c", script, "sh", pid.c_str(), deadline.c_str(), nullptr};
  pid_t child = 0;
  // The watchdog outlives this process only until it notices the exit: never waited for.
  posix_spawn(&child, "/bin/sh", &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[0]);
  // fds[1] stays open (close-on-exec) until this process is gone.
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  watch_exit();
  return rc;
}
