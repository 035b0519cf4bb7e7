#!/usr/bin/env bash
# The Node.js event-loop e2e with the explicit opt-in epoll syscall tracepoints (a hook every
# system call of the node pays for, never chosen by auto): the same checks against injected
# blocking, and sonde_agent_info naming that hook and its cost to processes not selected.
set -euo pipefail
export SONDE_E2E_WAIT_SOURCE=epoll-tracepoints
exec "$(dirname "$0")/nodejs_event_loop_test.sh"
