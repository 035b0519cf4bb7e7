// Long event-loop turns for the stall recorder's kernel test (usage: node stall_modes.js MODE):
//   stuck  the loop never turns again, spinning in sondeStuckForever()
//   sleep  one 300 ms turn spent off the CPU (Atomics.wait), then a quiet turn, then exit
'use strict';
const mode = process.argv[2];
console.log('ready');
function sondeStuckForever() {
  let x = 0;
  for (;;) x += Math.sqrt(x + 1);
}
if (mode === 'stuck') {
  setTimeout(() => sondeStuckForever(), 300);
} else if (mode === 'sleep') {
  setTimeout(() => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    console.log('slept');
    setTimeout(() => console.log('done'), 300);
  }, 300);
}
