// Blocks its event loop in a named function, COUNT times (0: forever) for MS milliseconds each,
// every GAP milliseconds (usage: node stall.js MODE COUNT MS GAP; MODE names the run in its
// output). At the end it prints node's own account of each blocked turn: the loop's active time
// (libuv's idle-time metric, performance.eventLoopUtilization) from the start of one block's
// callback to the start of the next callback, which holds that block's whole turn and nothing
// else long: "turns_ms=T1,T2,...", and the process's CPU time during each block: "cpu_ms=...".
'use strict';
const { performance } = require('perf_hooks');
const [mode, countArg, msArg, gapArg] = process.argv.slice(2);

function sondeStallCulprit(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

const count = Number(countArg);
const ms = Number(msArg);
const gap = Number(gapArg || 300);
const turns = [];
const cpus = [];  // the process's CPU time (ms) during each block
let lastActive = null;
function mark() {
  const active = performance.eventLoopUtilization().active;
  if (lastActive !== null) turns.push(active - lastActive);
  lastActive = active;
}
let done = 0;
console.log('ready pid=' + process.pid);
const timer = setInterval(() => {
  mark();
  const cpu = process.cpuUsage();
  sondeStallCulprit(ms);
  const used = process.cpuUsage(cpu);
  cpus.push((used.user + used.system) / 1000);
  done += 1;
  if (done === count) {
    clearInterval(timer);
    // A last quiet turn, so the agent sees the loop wait after the last block.
    setTimeout(() => {
      mark();
      console.log('turns_ms=' + turns.map((t) => t.toFixed(1)).join(','));
      console.log('cpu_ms=' + cpus.map((t) => t.toFixed(1)).join(','));
      console.log(mode + ' done ' + done);
    }, gap);
  }
}, gap);
