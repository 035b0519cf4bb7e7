// V8 frame naming test workload: the main thread blocks its event loop in burnBlocking, a
// known function at a known line, for 200 ms of every 250 ms. `churn` as argv[2] also
// allocates heavily while it blocks, so the GC moves objects during sampling. A round count as
// argv[3] ends it after that many rounds with "done <digest>": a digest of deterministic work
// done in every round, the same with or without the agent watching.
const churn = process.argv[2] === 'churn';
const rounds = Number(process.argv[3] || 0);

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

let digest = 0;
let done = 0;
function digestRound() {
  const words = [];
  for (let i = 0; i < 20000; i++) words.push('w' + ((i * 7919) % 10007));
  for (const w of words.sort()) digest = (digest * 31 + w.length + w.charCodeAt(1)) % 1000000007;
  if (++done === rounds) {
    clearInterval(burnTimer);
    clearInterval(digestTimer);
    console.log('done ' + digest);
  }
}

const burnTimer = setInterval(burnBlocking, 250);
const digestTimer = rounds > 0 ? setInterval(digestRound, 250) : null;
console.log('ready');
