// Routes libbpf's own messages into sonde's log: warnings stay warnings, the rest (verifier
// chatter, feature probes that are expected to fail) goes to debug. Call once at start-up.
#pragma once

namespace sonde::agent {

void route_libbpf_log();

}  // namespace sonde::agent
