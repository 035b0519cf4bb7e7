// `sonde-agent symbolize [--json] [--return-addresses] (BINARY | --kernel) ADDRESS...`: addresses
// to functions (and for Go, files, lines and inlined frames) the way the profiler will, like
// llvm-symbolizer, for users and tests.
#pragma once

#include <string>
#include <vector>

namespace sonde::agent {

struct SymbolizeOutput {
  int exit_code = 0;  // 0 all found, 1 something missing or unreadable, 2 usage error
  std::string out;    // what goes to stdout
  std::string err;    // what goes to stderr
};

// The command on its arguments (those after "symbolize"), without touching stdout/stderr.
SymbolizeOutput run_symbolize(const std::vector<std::string>& args);

// Entry point in the style of agent/commands.h: argv[0] is "symbolize".
int symbolize_main(int argc, char** argv);

}  // namespace sonde::agent
