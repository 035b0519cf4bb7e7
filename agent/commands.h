// Entry points of the sonde-agent subcommands. Each takes the arguments after the subcommand
// name (argv[0] is the subcommand) and returns the process exit code.
#pragma once

namespace sonde::agent {

int doctor_main(int argc, char** argv);
int events_main(int argc, char** argv);
int profile_main(int argc, char** argv);
int symbols_main(int argc, char** argv);

}  // namespace sonde::agent
