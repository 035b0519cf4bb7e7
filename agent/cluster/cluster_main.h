// In-cluster mode: the agent as a DaemonSet pod. It watches ProfilingPolicies and the pods of
// its node, instruments what the policies select there, and keeps its node's
// ProfilingNodeReport current.
#pragma once

namespace sonde::agent {

// `sonde-agent --cluster [OPTIONS]` (argv[0] is "--cluster", or the program name when the
// agent runs without arguments in a pod). Returns the process exit code.
int cluster_main(int argc, char** argv);

}  // namespace sonde::agent
