// OpenClaw beside troupe, `agent`-like half (README.md): a one-round reply through OpenClaw's
// OpenAI-compatible POST /v1/chat/completions, its model pointed at troupe's mock-llm. One
// fresh gateway per concurrency level, warm-up, then a closed loop of N clients; the gateway's
// whole process tree is measured from /proc.
//
//   node run.mjs --base-url http://127.0.0.1:PORT/v1 --concurrency 8 --runs 160 \
//       --json ../results/openclaw-one-round-c8.json
//
// Writes the peers' result format (bench/peers/README.md) with "task": "one-round", which
// `troupe bench --scenario agent --peers DIR` puts beside troupe's own one-round rows.

import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

import {
  loadavg,
  resetTreePeaks,
  startGateway,
  startTreeSampler,
  treeHwmKb,
  treeStats,
  versions,
} from './gateway.mjs';

/// The user message of every run; mock-llm's first rule (agent_scenario.jsonl) answers any
/// request whose last user message contains "[bench one-round]" with a fixed text in one round.
export const ONE_ROUND_MESSAGE = '[bench one-round] Say hello in one sentence.';
export const ONE_ROUND_ANSWER = '[one-round answer from mock-llm]';

const { values } = parseArgs({
  options: {
    'base-url': { type: 'string' },
    concurrency: { type: 'string', default: '1' },
    runs: { type: 'string' },
    warmup: { type: 'string', default: '5' },
    json: { type: 'string' },
    'timeout-ms': { type: 'string', default: '120000' },
    'keep-state': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (values.help) {
  process.stdout.write(
    'usage: node run.mjs --base-url http://127.0.0.1:PORT/v1 [--concurrency N] [--runs M]\n' +
      '         [--warmup K] [--json out.json] [--timeout-ms MS] [--keep-state]\n',
  );
  process.exit(0);
}
if (!values['base-url']) throw new Error('--base-url is required (the mock-llm /v1 URL)');
const baseUrl = values['base-url'].replace(/\/+$/, '');
const concurrency = Number.parseInt(values.concurrency, 10);
if (!(concurrency >= 1)) throw new Error('--concurrency must be >= 1');
const runs = values.runs ? Number.parseInt(values.runs, 10) : Math.max(60, 20 * concurrency);
const warmup = Math.max(1, Number.parseInt(values.warmup, 10) || 1);
const timeoutMs = Number.parseInt(values['timeout-ms'], 10);

const round = (x, digits = 3) => (x === null || x === undefined ? x : Number(x.toFixed(digits)));
const percentile = (sorted, p) =>
  sorted.length ? sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] : null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function mockStats() {
  try {
    const res = await fetch(new URL('/_mock/stats', baseUrl));
    return res.ok ? await res.json() : null;
  } catch {
    return null;
  }
}

/// The mock's own time for one one-round call, sent straight to it (the same wire OpenClaw
/// uses: streamed Chat Completions), one at a time.
async function mockOwnTime(n) {
  const times = [];
  for (let i = 0; i < n; ++i) {
    const t0 = performance.now();
    const res = await fetch(`${baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'mock-llm',
        stream: true,
        messages: [{ role: 'user', content: ONE_ROUND_MESSAGE }],
      }),
    });
    await res.text();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b);
}

const started = new Date();
const loadBeforeStart = loadavg();
const gw = await startGateway({ mockBaseUrl: baseUrl, toolProfile: 'minimal', keep: values['keep-state'] });
process.stderr.write(`openclaw gateway pid ${gw.pid} at ${gw.origin}, ready after ${Math.round(gw.startupMs)} ms\n`);
// Interrupted: stop the gateway and its helpers first (they would outlive this process).
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => {
    await gw.stop();
    process.exit(130);
  });
}
let status = 1;
try {
  const errorSamples = [];
  const oneRun = async () => {
    const t0 = performance.now();
    try {
      const res = await fetch(`${gw.origin}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${gw.token}` },
        body: JSON.stringify({ model: 'openclaw/default', messages: [{ role: 'user', content: ONE_ROUND_MESSAGE }] }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
      const body = JSON.parse(text);
      const content = body?.choices?.[0]?.message?.content;
      if (typeof content !== 'string' || !content.includes(ONE_ROUND_ANSWER)) {
        throw new Error(`answer lacks the mock's text: ${text.slice(0, 300)}`);
      }
      return { ok: true, ms: performance.now() - t0 };
    } catch (e) {
      if (errorSamples.length < 5) errorSamples.push(String(e?.stack ?? e).slice(0, 600));
      return { ok: false, ms: performance.now() - t0 };
    }
  };

  // Warm-up: sequential, verified, not recorded. The first request loads the agent runtime's
  // modules and prepares the session store (8-14 s here); later ones are warm.
  const warmupMs = [];
  for (let i = 0; i < warmup; ++i) {
    const r = await oneRun();
    if (!r.ok) throw new Error(`warm-up request failed:\n${errorSamples.join('\n')}\n${gw.logTail()}`);
    warmupMs.push(round(r.ms, 1));
  }
  await sleep(2_000); // let the last warm-up's background work (session writes, GC) finish
  const idle = treeStats(gw.pid);
  const hwmReset = resetTreePeaks(gw.pid);
  const statsBefore = await mockStats();
  const loadBefore = loadavg();
  const sampler = startTreeSampler(gw.pid, 50);

  const latencies = [];
  let errors = 0;
  let next = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (next < runs) {
      ++next;
      const r = await oneRun();
      if (r.ok) latencies.push(r.ms);
      else ++errors;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedS = (performance.now() - t0) / 1000;
  const peak = sampler.stop();
  const after = treeStats(gw.pid);
  const hwmKb = treeHwmKb(gw.pid);
  const statsAfter = await mockStats();
  const loadAfter = loadavg();
  const mockRequests =
    statsBefore && statsAfter ? statsAfter.completion_requests - statsBefore.completion_requests : null;
  const own = await mockOwnTime(50);

  latencies.sort((a, b) => a - b);
  const okRuns = latencies.length;
  const rssPeakKb = Math.max(peak.peakKb, after.rssKb);
  const mockP50 = percentile(own, 50);
  const mockP99 = percentile(own, 99);
  const report = {
    peer: 'openclaw',
    task: 'one-round',
    concurrency,
    runs: next,
    errors,
    runs_per_s: round(okRuns / elapsedS, 2),
    latency_ms: {
      p50: round(percentile(latencies, 50)),
      p90: round(percentile(latencies, 90)),
      p99: round(percentile(latencies, 99)),
      max: round(latencies.length ? latencies[latencies.length - 1] : null),
    },
    rss_idle_mb: round(idle.rssKb / 1024, 1),
    rss_peak_mb: round(rssPeakKb / 1024, 1),
    mem_per_concurrent_run_kb: round((rssPeakKb - idle.rssKb) / concurrency, 1),
    duration_s: round(elapsedS),
    cpu_ms_per_run: next ? round((after.cpuMs - idle.cpuMs) / next) : null,
    beyond_mock_ms: {
      p50: round(percentile(latencies, 50) - mockP50),
      p99: round(percentile(latencies, 99) - mockP99),
    },
    mock_own_time_ms: { p50: round(mockP50), p99: round(mockP99) },
    mock_completion_requests: mockRequests,
    processes: after.pids.length,
    process_rss_idle_kb: idle.processes,
    pss_idle_mb: round(idle.pssKb / 1024, 1),
    pss_peak_mb: round(peak.peakPssKb / 1024, 1),
    vmhwm_sum_mb: hwmReset ? round(hwmKb / 1024, 1) : null,
    vmhwm_reset: hwmReset,
    memory_samples: peak.samples,
    gateway_startup_ms: round(gw.startupMs, 0),
    warmup_runs: warmup,
    warmup_ms: warmupMs,
    loadavg_at_start: loadBeforeStart,
    loadavg_before: loadBefore,
    loadavg_after: loadAfter,
    load_average_before: loadBefore ? loadBefore.split(' ').slice(0, 3).map(Number) : null,
    load_average_after: loadAfter ? loadAfter.split(' ').slice(0, 3).map(Number) : null,
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, mem_gib: round(os.totalmem() / 2 ** 30, 1) },
    versions: { node: process.version, ...versions() },
    config: { ...gw.config, gateway: { ...gw.config.gateway, auth: { mode: 'token', token: '(random per run)' } } },
    request: { model: 'openclaw/default', messages: [{ role: 'user', content: ONE_ROUND_MESSAGE }] },
    command: [process.argv0, path.relative(process.cwd(), process.argv[1]), ...process.argv.slice(2)].join(' '),
    cwd: process.cwd(),
    started_at: started.toISOString(),
    error_samples: errorSamples,
  };
  const problems = [];
  if (mockRequests !== null && errors === 0 && mockRequests !== next) {
    problems.push(`mock-llm saw ${mockRequests} completion requests for ${next} runs (expected 1 per run)`);
  }
  report.problems = problems;
  if (values.json) {
    mkdirSync(path.dirname(path.resolve(values.json)), { recursive: true });
    writeFileSync(values.json, JSON.stringify(report, null, 2) + '\n');
  }
  const l = report.latency_ms;
  process.stdout.write(
    `openclaw one-round c=${concurrency} runs=${next} errors=${errors} ${report.runs_per_s} runs/s  ` +
      `latency ms p50 ${l.p50} p99 ${l.p99} max ${l.max}  rss (${report.processes} processes) idle ` +
      `${report.rss_idle_mb} MB peak ${report.rss_peak_mb} MB  cpu ${report.cpu_ms_per_run} ms/run  ` +
      `mock requests ${mockRequests}` +
      (problems.length ? `  PROBLEMS: ${problems.join('; ')}` : '') +
      '\n',
  );
  if (errorSamples.length) process.stderr.write(`first errors:\n${errorSamples.join('\n---\n')}\n`);
  status = errors === 0 && problems.length === 0 ? 0 : 1;
} finally {
  await gw.stop();
}
process.exitCode = status;
