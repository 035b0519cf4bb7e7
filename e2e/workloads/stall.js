// Blocks its event loop in a named function, COUNT times for MS milliseconds each, every
// GAP milliseconds (usage: node stall.js COUNT MS GAP). COUNT 0 with MS below the agent's
// threshold makes many short turns instead: "short" mode (node stall.js short N MS).
'use strict';
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
let done = 0;
console.log('ready pid=' + process.pid);
const timer = setInterval(() => {
  sondeStallCulprit(ms);
  done += 1;
  if (done === count) {
    clearInterval(timer);
    // A last quiet turn, so the agent sees the loop wait after the last block.
    setTimeout(() => console.log(mode + ' done ' + done), gap);
  }
}, gap);
