// Runs a shape of event-loop work and measures it the way Node itself does, over one window, for
// e2e/nodejs_runtime_metrics_test.sh to compare with the agent's OpenTelemetry metrics.
//
//   node eventloop_truth.js SHAPE START_AT_MS WINDOW_MS
//
// SHAPE: blocks  a 200 ms block every second (a timer callback spinning), idle between
//        turns   ~1 ms turns back to back with ~2 ms waits (a 2 ms timer whose callback spins
//                1 ms): thousands of turns in the window
//        mix     both
// The window is [START_AT_MS, START_AT_MS + WINDOW_MS] (epoch ms); the blocks start 300 ms into
// each second of it, so both ends fall in idle time. At the window's start the script resets
// monitorEventLoopDelay({resolution: 10}) (enabled from the start) and takes
// performance.eventLoopUtilization(); at its end it prints one line:
//   truth {"utilization":..,"min":..,"max":..,"mean":..,"stddev":..,"p50":..,"p90":..,"p99":..,"count":..}
// (seconds), runs its shape 0.5 s more and exits.
'use strict';
const { monitorEventLoopDelay, performance } = require('perf_hooks');

const [shape, startArg, windowArg] = process.argv.slice(2);
const startAt = Number(startArg);
const endAt = startAt + Number(windowArg);
const stopAt = endAt + 500;
if (!['blocks', 'turns', 'mix'].includes(shape) || !(startAt > 0) || !(endAt > startAt)) {
  console.error('usage: eventloop_truth.js blocks|turns|mix START_AT_MS WINDOW_MS');
  process.exit(2);
}

const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();

function spin(ms) {
  const end = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  while (process.hrtime.bigint() < end) { /* the loop is blocked */ }
}
function at(epochMs, fn) {
  setTimeout(fn, Math.max(0, epochMs - Date.now()));
}

// The shape runs from a second before the window to half a second after it.
const shapeFrom = startAt - 1000;
if (shape === 'blocks' || shape === 'mix') {
  for (let t = shapeFrom + 300; t + 200 < stopAt; t += 1000) at(t, () => spin(200));
}
if (shape === 'turns' || shape === 'mix') {
  const turn = () => {
    if (Date.now() >= stopAt) return;
    spin(1);
    setTimeout(turn, 2);
  };
  at(shapeFrom, turn);
}

let elu0;
at(startAt, () => {
  delay.reset();
  elu0 = performance.eventLoopUtilization();
});
at(endAt, () => {
  const elu = performance.eventLoopUtilization(elu0);
  const s = (ns) => ns / 1e9;
  console.log('truth ' + JSON.stringify({
    utilization: elu.utilization,
    min: s(delay.min), max: s(delay.max), mean: s(delay.mean), stddev: s(delay.stddev),
    p50: s(delay.percentile(50)), p90: s(delay.percentile(90)), p99: s(delay.percentile(99)),
    count: delay.count,
  }));
});
at(stopAt, () => process.exit(0));
