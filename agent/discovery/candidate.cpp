#include "agent/discovery/candidate.h"

namespace sonde::agent {

Result<Candidate> open_candidate(const ProcReader& proc, pid_t pid, bool running) {
  ASSIGN_OR_RETURN(auto info, proc.read(pid));
  std::string path = proc.exe_path(pid);
  ASSIGN_OR_RETURN(auto binary, symbols::OpenBinary::open(path));
  return Candidate{std::move(info), std::move(path), std::move(binary), running};
}

}  // namespace sonde::agent
