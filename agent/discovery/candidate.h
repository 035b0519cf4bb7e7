// Candidate: a process the agent may instrument, with its executable opened once for every
// feature (each reads the same file: identity and symbols cannot disagree between them).
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <string>

#include "agent/discovery/proc_reader.h"
#include "agent/symbols/binary_identity.h"
#include "common/result.h"

namespace sonde::agent {

struct Candidate {
  ProcessInfo info;
  std::string path;  // /proc/<pid>/exe: opens the process's executable while it lives
  symbols::OpenBinary binary;
  bool running;  // found by the start-up scan (it may be mid-flight), not at its exec
};

// Reads the process and opens its executable. Errors carry ENOENT/ESRCH when it is gone.
Result<Candidate> open_candidate(const ProcReader& proc, pid_t pid, bool running);

// The process exited (or never existed) while we looked at it: not worth a log line.
inline bool is_gone(const Error& e) {
  return e.code() == ENOENT || e.code() == ESRCH;
}

}  // namespace sonde::agent
