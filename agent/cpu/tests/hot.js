// CPU profile test workload: one hot JS function (run with --perf-basic-prof).
let sink = 0;
function hotJsFunction() {
  for (let i = 0; i < 1e7; i++) sink += i % 7;
}
console.log('ready');
for (;;) hotJsFunction();
