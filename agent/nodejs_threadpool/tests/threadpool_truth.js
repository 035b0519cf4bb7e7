// The process's own account of its libuv thread pool, for the thread-pool truth tests
// (pool_monitor_test, e2e/nodejs_threadpool_test.sh). Run with UV_THREADPOOL_SIZE=4.
//
//   node threadpool_truth.js pbkdf2 BATCHES ITERATIONS
//     BATCHES batches of 16 crypto.pbkdf2 calls of ITERATIONS iterations each, one batch after
//     the other; per batch, one line:
//       pbkdf2 <submit ns> <posted ns> <callback ns> x16   (in the order the callbacks ran)
//   node threadpool_truth.js fifo HOLD1_MS HOLD2_MS FIFO_DIR
//     6 fs.read calls on 6 FIFOs of FIFO_DIR that nobody writes: 4 block the pool's threads, 2
//     wait in its queue. HOLD1_MS later FIFOs 0 and 1 get a byte (their reads end, the 2 queued
//     reads take the threads and block), HOLD2_MS after that the other 4. One line:
//       fifo <submit ns> <posted ns> <first release ns> <second release ns> <callback ns> x6
// (submit: before the first call; posted: after the last one, every task in the pool's queue)
//   node threadpool_truth.js flood N
//     4 crypto.pbkdf2 of 2,000,000 iterations (seconds each: the 4 threads busy), then N of 1
//     iteration queued behind them; "flood posted" once all are posted, "done" at the end.
//
// Times are process.hrtime.bigint(): libuv's uv_hrtime, CLOCK_MONOTONIC, the clock the agent
// stamps its readings with. Both modes first run one pbkdf2 so the pool exists (nthreads set),
// print "ready", and start on SIGUSR2 (so a test can have the process tracked first); "done"
// at the end, then the process stays idle until killed.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const [mode, a, b, c] = process.argv.slice(2);
const now = () => process.hrtime.bigint();

function pbkdf2Batches(batches, iterations) {
  let left = batches;
  const batch = () => {
    if (left-- === 0) return finish();
    const callbacks = [];
    const submit = now();
    for (let i = 0; i < 16; i++) {
      crypto.pbkdf2('secret', 'salt', iterations, 64, 'sha512', (err) => {
        if (err) throw err;
        callbacks.push(now());
        if (callbacks.length === 16) {
          console.log(`pbkdf2 ${submit} ${posted} ${callbacks.join(' ')}`);
          setTimeout(batch, 300);  // the pool idle between batches
        }
      });
    }
    const posted = now();
  };
  batch();
}

function fifoReads(hold1, hold2, dir) {
  const fds = [];
  for (let i = 0; i < 6; i++) {
    const p = path.join(dir, `fifo${i}`);
    // O_RDWR: a FIFO opened so never blocks the open, and a byte written to it ends a read.
    fds.push(fs.openSync(p, 'r+'));
  }
  const callbacks = [];
  let release1 = 0n;
  let release2 = 0n;
  const submit = now();
  for (const fd of fds) {
    fs.read(fd, Buffer.alloc(1), 0, 1, null, (err) => {
      if (err) throw err;
      callbacks.push(now());
      if (callbacks.length === 6) {
        console.log(`fifo ${submit} ${posted} ${release1} ${release2} ${callbacks.join(' ')}`);
        finish();
      }
    });
  }
  const posted = now();
  setTimeout(() => {
    release1 = now();
    fs.writeSync(fds[0], 'x');
    fs.writeSync(fds[1], 'x');
    setTimeout(() => {
      release2 = now();
      for (const fd of fds.slice(2)) fs.writeSync(fd, 'x');
    }, hold2);
  }, hold1);
}

function flood(n) {
  let left = 4 + n;
  const one = (err) => {
    if (err) throw err;
    if (--left === 0) finish();
  };
  for (let i = 0; i < 4; i++) crypto.pbkdf2('secret', 'salt', 2000000, 64, 'sha512', one);
  for (let i = 0; i < n; i++) crypto.pbkdf2('secret', 'salt', 1, 64, 'sha512', one);
  console.log('flood posted');
}

function finish() {
  console.log('done');
}

// A signal handler does not keep the loop alive: this does, until the process is killed.
setInterval(() => {}, 1000);
crypto.pbkdf2('warm', 'salt', 1, 64, 'sha512', () => {
  process.once('SIGUSR2', () => {
    if (mode === 'pbkdf2') pbkdf2Batches(Number(a), Number(b));
    else if (mode === 'fifo') fifoReads(Number(a), Number(b), c);
    else if (mode === 'flood') flood(Number(a));
    else throw new Error(`unknown mode ${mode}`);
  });
  console.log('ready');
});
