#!/usr/bin/env bash
# The Node.js event-loop e2e with the opt-in libc-uprobes wait hook (uprobes on the C library's
# epoll functions, per library file): the same checks against injected blocking, plus one
# hooked library file and the hook named in sonde_agent_info.
set -euo pipefail
export SONDE_E2E_WAIT_SOURCE=libc-uprobes
exec "$(dirname "$0")/nodejs_event_loop_test.sh"
