// Prints the reports in a results directory as one Markdown table.
//   node bench/peers/summarize.mjs [bench/peers/results]
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), 'results');
const reports = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')))
  .sort((a, b) => a.peer.localeCompare(b.peer) || a.concurrency - b.concurrency);

const fmt = (x) => (x === null || x === undefined ? '-' : x.toLocaleString('en-US'));
console.log(
  '| peer | concurrency | runs | errors | runs/s | p50 ms | p90 ms | p99 ms | max ms | RSS idle MB | RSS peak MB | KB per concurrent run | CPU ms/run |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of reports) {
  const l = r.latency_ms;
  const cells = [r.peer, r.concurrency, r.runs, r.errors, r.runs_per_s, l.p50, l.p90, l.p99, l.max,
    r.rss_idle_mb, r.rss_peak_mb, r.mem_per_concurrent_run_kb, r.cpu_ms_per_run];
  console.log(`| ${cells.map((c) => (typeof c === 'number' ? fmt(Math.round(c * 10) / 10) : fmt(c))).join(' | ')} |`);
}
