// An fs-heavy Node.js workload for the thread-pool benchmark (bench/nodejs/threadpool_cost.sh):
// CONCURRENCY chains of fs.stat + fs.readFile of a 4 KiB file, every call through libuv's thread
// pool (run with UV_USE_IO_URING=0), for SECONDS after a 1 s warm-up; prints "ops N CPU" (completed
// calls per second in the measured window, and the process's CPU time per call in µs, all its
// threads: process.cpuUsage()) and exits.
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');

const [seconds = '10', concurrency = '64'] = process.argv.slice(2);
const file = path.join(os.tmpdir(), `sonde-fs-heavy-${process.pid}`);
fs.writeFileSync(file, Buffer.alloc(4096, 1));
let counting = false;
let ops = 0;
let stop = false;
function chain() {
  if (stop) return;
  fs.stat(file, (err) => {
    if (err) throw err;
    if (counting) ops++;
    fs.readFile(file, (err2) => {
      if (err2) throw err2;
      if (counting) ops++;
      chain();
    });
  });
}
for (let i = 0; i < Number(concurrency); i++) chain();
setTimeout(() => {
  counting = true;
  const start = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  setTimeout(() => {
    counting = false;
    stop = true;
    const s = Number(process.hrtime.bigint() - start) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    console.log(`ops ${(ops / s).toFixed(0)} ${((cpu.user + cpu.system) / ops).toFixed(3)}`);
    fs.unlinkSync(file);
    process.exit(0);  // the calls still in flight would find no file
  }, Number(seconds) * 1000);
}, 1000);
