// CPU profile test workload for blocked=true: the main thread blocks its event loop in
// blockingHandler (200 ms out of every 300 ms) while a worker thread spins in workerSpin,
// which never blocks the main loop.
const { Worker, isMainThread } = require('worker_threads');

function workerSpin() {
  let x = 0;
  for (let i = 0; i < 1e7; i++) x += i % 3;
  return x;
}

function blockingHandler() {
  const end = Date.now() + 200;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

if (isMainThread) {
  new Worker(__filename);
  setInterval(blockingHandler, 300);
  console.log('ready');
} else {
  for (;;) workerSpin();
}
