// Long event-loop turns for the stall recorder's kernel test (usage: node stall_modes.js MODE):
//   stuck  the loop never turns again, spinning in sondeStuckForever()
//   sleep  one 300 ms turn spent off the CPU (Atomics.wait), then a quiet turn, then exit
// Each starts after two quiet 500 ms turns: the test tracks the process after "ready" from its
// next loop wait (LoopProbes' Now::kUnknown), which the first quiet turn provides.
'use strict';
const mode = process.argv[2];
console.log('ready');
function sondeStuckForever() {
  let x = 0;
  for (;;) x += Math.sqrt(x + 1);
}
function later(fn) {
  setTimeout(() => setTimeout(fn, 500), 500);
}
if (mode === 'stuck') {
  later(() => sondeStuckForever());
} else if (mode === 'sleep') {
  later(() => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    console.log('slept');
    setTimeout(() => console.log('done'), 300);
  });
}
