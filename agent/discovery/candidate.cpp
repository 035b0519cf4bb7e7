#include "agent/discovery/candidate.h"

namespace sonde::agent {

std::string Candidate::attach_path() const {
  return "/proc/self/fd/" + std::to_string(binary.fd());
}

Result<Candidate> open_candidate(const ProcReader& proc, ProcessInfo info, bool running) {
  ASSIGN_OR_RETURN(auto binary, symbols::OpenBinary::open(proc.exe_path(info.pid)));
  return Candidate{std::move(info), std::move(binary), running};
}

}  // namespace sonde::agent
