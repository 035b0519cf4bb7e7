// Runs N event-loop iterations (setImmediate chains: each one is a uv__io_poll with a zero
// timeout, i.e. one uprobe hit and one epoll wait) and prints the elapsed nanoseconds.
'use strict';
const n = Number(process.argv[2] || 200000);
let i = 0;
const start = process.hrtime.bigint();
function step() {
  if (++i < n) return setImmediate(step);
  console.log(String(process.hrtime.bigint() - start));
}
setImmediate(step);
