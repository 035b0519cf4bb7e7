// Test helper: a child process with its stdout readable line by line; killed on destruction.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace sonde::testing {

class ChildProcess {
 public:
  // The child gets SIGKILL when the thread that made it exits, so a test that crashes or
  // aborts never leaves it running (and holding the test runner's output pipe open). Returns
  // once the child has exec'd (or failed to): until then /proc would show this test's name and
  // executable for its pid.
  explicit ChildProcess(std::vector<std::string> argv) {
    int fds[2];
    int exec_fds[2];  // closed by the child's exec (close-on-exec): the parent reads EOF then
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    if (pipe2(exec_fds, O_CLOEXEC) != 0) {
      close(fds[0]);
      close(fds[1]);
      return;
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec.
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent ||
          dup2(fds[1], STDOUT_FILENO) < 0) {
        _exit(127);
      }
      execve(args[0], args.data(), environ);
      _exit(127);
    }
    close(fds[1]);
    close(exec_fds[1]);
    char c;
    while (pid_ > 0 && read(exec_fds[0], &c, 1) < 0 && errno == EINTR) {
    }
    close(exec_fds[0]);
    out_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& last_line() const { return last_line_; }

  // Reads stdout until a line starting with `prefix` arrives; false on timeout or EOF. The
  // line is kept in last_line().
  bool wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) {
          last_line_ = line;
          return true;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[512];
      ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return false;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // Waits for exit; returns the wait status or -1.
  int wait() {
    int status = -1;
    if (pid_ > 0 && waitpid(pid_, &status, 0) == pid_) reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buffer_;
  std::string last_line_;
};

// Waits up to `timeout` until exec replaced the forked test binary of `pid` with a file whose
// path (/proc/<pid>/exe) contains `name`; false when it did not.
inline bool wait_for_exe(pid_t pid, const std::string& name, std::chrono::milliseconds timeout) {
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    char buf[4096];
    const ssize_t n = readlink(link.c_str(), buf, sizeof buf);
    if (n > 0 && std::string(buf, static_cast<size_t>(n)).find(name) != std::string::npos) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    usleep(10000);
  }
}

// The standard output of shell command `cmd` (ground truth from readelf, objdump, go tool
// pprof...), empty if it cannot be started.
inline std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

// The file offset of a dynamic function symbol of `lib`, from binutils (readelf): its value
// through the PT_LOAD segment that holds it; 0 when absent.
inline uint64_t readelf_file_offset(const std::string& lib, const std::string& name) {
  uint64_t value = 0;
  std::istringstream syms(command_output("readelf --dyn-syms -W " + lib));
  std::string line;
  while (std::getline(syms, line)) {
    std::istringstream f(line);
    std::string num, v, size, type, bind, vis, ndx, sym;
    f >> num >> v >> size >> type >> bind >> vis >> ndx >> sym;
    if (type == "FUNC" && ndx != "UND" && (sym == name || sym.starts_with(name + "@"))) {
      value = std::stoull(v, nullptr, 16);
      break;
    }
  }
  if (value == 0) return 0;
  std::istringstream segs(command_output("readelf -lW " + lib));
  while (std::getline(segs, line)) {
    std::istringstream f(line);
    std::string type, off, vaddr, paddr, filesz, memsz;
    f >> type >> off >> vaddr >> paddr >> filesz >> memsz;
    if (type != "LOAD") continue;
    uint64_t o = std::stoull(off, nullptr, 16), va = std::stoull(vaddr, nullptr, 16);
    if (value >= va && value < va + std::stoull(filesz, nullptr, 16)) return value - va + o;
  }
  return 0;
}

}  // namespace sonde::testing
