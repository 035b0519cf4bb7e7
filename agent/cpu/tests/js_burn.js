// V8 frame naming test workload: the main thread blocks its event loop in burnBlocking, a
// known function at a known line, for 200 ms of every 250 ms. `churn` as argv[2] also
// allocates heavily while it blocks, so the GC moves objects during sampling.
const churn = process.argv[2] === 'churn';

function burnBlocking() {
  const end = Date.now() + 200;
  let x = 0;
  let garbage = [];
  while (Date.now() < end) {
    x += Math.sqrt(x + 1);
    if (churn) {
      garbage.push({ x, s: 'v' + x });
      if (garbage.length > 10000) garbage = [];
    }
  }
  return x;
}

setInterval(burnBlocking, 250);
console.log('ready');
