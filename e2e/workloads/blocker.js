// Blocks the Node.js event loop for known durations inside one kind of callback, then idles.
//
//   node blocker.js KIND COUNT MS [IDLE_MS]
//
// KIND: timer | immediate | tcp | readfile | udp | spawnsync | idle | forever
//   timer      COUNT setTimeout callbacks each busy for MS
//   immediate  COUNT setImmediate callbacks each busy for MS
//   tcp        COUNT socket 'data' callbacks (loopback client → server) each busy for MS
//   readfile   COUNT fs.readFile completion callbacks (thread pool) each busy for MS
//   udp        COUNT UDP 'message' callbacks each busy for MS
//   spawnsync  COUNT execFileSync('sleep', MS) calls: the loop waits on a nested loop
//   idle       no blocking at all (a timer every 100 ms keeps the process alive)
//   forever    one callback that blocks for MS (used for "blocked right now")
//   periodic   one timer callback busy for MS every second, COUNT times (0: forever): the demo
// BLOCKER_STARTUP_MS: a synchronous pause before anything else, like the require() of a large
// application at start-up (before the event loop first waits).
// Prints "ready <pid> elu_active_ms=<ms>" once set up, "blocking done elu_active_ms=<ms>" after
// the last block (Node's own count of event-loop active time since the loop started), then
// stays idle for IDLE_MS (default: until killed).
'use strict';
const fs = require('fs');
const net = require('net');
const dgram = require('dgram');
const cp = require('child_process');
// Node's own view of its loop: active (not idle in epoll) milliseconds since the loop started,
// from libuv's idle-time metrics. The e2e tests compare the agent with it.
const { performance } = require('perf_hooks');

const [kind, countArg, msArg, idleArg] = process.argv.slice(2);
const startupMs = Number(process.env.BLOCKER_STARTUP_MS || 0);
if (startupMs > 0) {
  const end = Date.now() + startupMs;
  while (Date.now() < end) { /* start-up work, before the loop's first wait */ }
}
const count = Number(countArg || 0);
const ms = Number(msArg || 0);
const idleMs = idleArg === undefined ? -1 : Number(idleArg);

function busy(duration) {
  const end = process.hrtime.bigint() + BigInt(Math.round(duration * 1e6));
  while (process.hrtime.bigint() < end) { /* spin: the loop is blocked */ }
}

let remaining = count;
function blocked() {
  busy(ms);
  remaining -= 1;
  if (remaining === 0) finish();
}

// Keeps the process alive without waking its loop (a wake-up is a little busy time too).
const keepAlive = setInterval(() => {}, 2 ** 30);
function finish() {
  console.log(`blocking done elu_active_ms=${performance.eventLoopUtilization().active.toFixed(3)}`);
  if (idleMs >= 0) setTimeout(() => { clearInterval(keepAlive); process.exit(0); }, idleMs);
}

// Leave time between blocks so each one is a separate callback of its kind.
const gap = 50;

// Each kind sets up what it needs (servers, sockets), then calls start(run); `run` injects
// the blocking. "ready" is printed between the two, so a reader of the blocked-time counter
// can take its baseline after set-up.
const kinds = {
  timer(start) {
    start(() => { for (let i = 0; i < count; i++) setTimeout(blocked, gap * (i + 1) + ms * i); });
  },
  immediate(start) {
    start(() => {
      let i = 0;
      const next = () => {
        if (i++ >= count) return;
        setImmediate(() => { blocked(); setTimeout(next, gap); });
      };
      next();
    });
  },
  tcp(start) {
    const server = net.createServer((sock) => sock.on('data', () => blocked()));
    server.listen(0, '127.0.0.1', () => {
      const client = net.connect(server.address().port, '127.0.0.1', () => {
        client.setNoDelay(true);
        start(() => {
          let i = 0;
          const send = () => { if (i++ < count) { client.write('x'); setTimeout(send, gap + ms); } };
          send();
        });
      });
    });
  },
  readfile(start) {
    start(() => {
      let i = 0;
      const next = () => {
        if (i++ >= count) return;
        fs.readFile(__filename, () => { blocked(); setTimeout(next, gap); });
      };
      next();
    });
  },
  udp(start) {
    const server = dgram.createSocket('udp4');
    server.on('message', () => blocked());
    server.bind(0, '127.0.0.1', () => {
      const client = dgram.createSocket('udp4');
      client.connect(server.address().port, '127.0.0.1', () => {
        start(() => {
          let i = 0;
          const send = () => { if (i++ < count) { client.send('x'); setTimeout(send, gap + ms); } };
          send();
        });
      });
    });
  },
  spawnsync(start) {
    start(() => {
      let i = 0;
      const next = () => {
        if (i++ >= count) return;
        cp.execFileSync('sleep', [String(ms / 1000)]);
        remaining -= 1;
        if (remaining === 0) finish();
        setTimeout(next, gap);
      };
      setTimeout(next, gap);
    });
  },
  idle(start) { start(finish); },
  forever(start) { start(() => setTimeout(() => busy(ms), gap)); },
  periodic(start) {
    start(() => {
      const tick = setInterval(() => {
        busy(ms);
        if (count > 0 && --remaining === 0) { clearInterval(tick); finish(); }
      }, 1000);
    });
  },
};

if (!kinds[kind]) {
  console.error(`unknown kind ${kind}; one of ${Object.keys(kinds).join(', ')}`);
  process.exit(2);
}
// BLOCKER_START_DELAY_MS: a pause before blocking starts, so an agent can find the process
// while its loop waits. BLOCKER_GO_FILE: before that pause, wait until this file exists (looked
// for every 20 ms, the loop waiting in between), so a test can start the blocking once it saw
// the agent instrument the process.
const startDelay = Number(process.env.BLOCKER_START_DELAY_MS || 100);
const goFile = process.env.BLOCKER_GO_FILE;
kinds[kind]((run) => {
  const begin = () => setTimeout(() => {
    console.log(`ready ${process.pid} elu_active_ms=${performance.eventLoopUtilization().active.toFixed(3)}`);
    setTimeout(run, 0);
  }, startDelay);
  if (!goFile) return begin();
  const poll = setInterval(() => { if (fs.existsSync(goFile)) { clearInterval(poll); begin(); } }, 20);
});
