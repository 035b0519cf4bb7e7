// Standalone mode: the agent on one host without Kubernetes. It instruments the processes
// the config selects (every Node.js process by default) and serves /metrics.
#pragma once

namespace sonde::agent {

// `sonde-agent --standalone [OPTIONS]`; argv[0] is "--standalone".
int standalone_main(int argc, char** argv);

}  // namespace sonde::agent
