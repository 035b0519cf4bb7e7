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
  symbols::OpenBinary binary;
  bool running;  // found by the start-up scan (it may be mid-flight), not at its exec

  // The path through which probes are attached: the agent's own descriptor of the file that
  // was identified and parsed (/proc/self/fd/N), never /proc/<pid>/exe, which names whatever
  // the process runs now (after a re-exec, another binary, where the offsets mean nothing).
  std::string attach_path() const;
};

// Opens the executable of the process `info` describes (through /proc/<pid>/exe). Errors carry
// ENOENT/ESRCH when it is gone.
Result<Candidate> open_candidate(const ProcReader& proc, ProcessInfo info, bool running);

// The process exited (or never existed) while we looked at it: not worth a log line.
inline bool is_gone(const Error& e) {
  return e.code() == ENOENT || e.code() == ESRCH;
}

}  // namespace sonde::agent
