// Shared load driver for the peer agent benchmarks (bench/peers/README.md).
//
// A peer module supplies `setup(options)` returning `{ runOnce(index) }`; runOnce performs one
// complete agent run (LLM -> tool -> LLM -> final answer) and resolves to
// `{ text, toolCalls }`: the final answer text and how many times the `read` tool ran for that
// run. This file owns everything else, identically for every peer: options, warm-up, the
// closed-loop driver (at most N runs in flight), verification, latency percentiles, memory
// readings and the JSON report.
//
// No npm dependencies: only node: built-ins.

import { readFileSync, writeFileSync, mkdirSync, openSync, writeSync, closeSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// The text every successful run's final answer must contain: it is only in the mock's
// scripted reply (agent_scenario.jsonl), so an answer that did not come from the mock fails.
export const MOCK_ANSWER = '[agent-scenario answer from mock-llm]';

// The user message of every run. The mock's rules do not look at it (they match on whether a
// tool result is present), it only has to be a plausible task.
export const TASK = 'Read the file input.txt and tell me in one sentence what it is.';

export const INSTRUCTIONS =
  'You are a helpful assistant working in a small workspace. Use the read tool to look at files.';

export const READ_DESCRIPTION =
  'Read a text file from the workspace with numbered lines (at most 256 KiB).';

const MAX_READ_BYTES = 256 * 1024;

// The `read` tool's work, shared by the peers so that each does exactly the same thing on every
// call, which is what troupe's built-in read tool does (tools/src/workspace_tools.cpp): resolve
// the path inside the workspace (refusing escapes), read the file, number its lines ("%6d\t"),
// and answer a JSON object with the numbered content.
export async function readTool(workspace, filePath) {
  const target = path.resolve(workspace, filePath);
  if (target !== workspace && !target.startsWith(workspace + path.sep)) {
    return JSON.stringify({ ok: false, error: `path escapes the workspace: ${filePath}` });
  }
  const data = await readFile(target);
  const content = data.subarray(0, MAX_READ_BYTES).toString('utf8');
  const lines = content.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  let numbered = '';
  for (let i = 0; i < lines.length; ++i) {
    numbered += `${String(i + 1).padStart(6, ' ')}\t${lines[i]}\n`;
  }
  return JSON.stringify({
    ok: true,
    path: filePath,
    from_line: 1,
    to_line: lines.length,
    total_lines: lines.length,
    more: false,
    content: numbered,
  });
}

// Installed versions of a peer's packages, read from its node_modules (some packages' export
// maps hide their package.json from require).
export function packageVersions(peerDir, names) {
  const out = {};
  for (const name of names) {
    try {
      out[name] = JSON.parse(readFileSync(path.join(peerDir, 'node_modules', name, 'package.json'), 'utf8')).version;
    } catch {
      out[name] = null;
    }
  }
  return out;
}

export function parseOptions(argv = process.argv.slice(2)) {
  const { values } = parseArgs({
    args: argv,
    options: {
      'base-url': { type: 'string' },
      concurrency: { type: 'string', default: '1' },
      runs: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string', default: '20' },
      json: { type: 'string' },
      workspace: { type: 'string', default: path.join(here, '..', 'fixtures') },
      'timeout-ms': { type: 'string', default: '60000' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      'usage: node --expose-gc run.mjs --base-url http://127.0.0.1:PORT/v1 [--concurrency N]\n' +
        '         [--runs M | --duration S] [--warmup K] [--json out.json] [--workspace DIR]\n' +
        '         [--timeout-ms MS]\n',
    );
    process.exit(0);
  }
  if (!values['base-url']) throw new Error('--base-url is required (the mock-llm /v1 URL)');
  const concurrency = Number.parseInt(values.concurrency, 10);
  if (!(concurrency >= 1)) throw new Error('--concurrency must be >= 1');
  const runs = values.runs !== undefined ? Number.parseInt(values.runs, 10) : undefined;
  const duration = values.duration !== undefined ? Number.parseFloat(values.duration) : undefined;
  if (runs === undefined && duration === undefined) throw new Error('give --runs M or --duration S');
  if (runs !== undefined && duration !== undefined) throw new Error('give --runs or --duration, not both');
  if (runs !== undefined && !(runs >= 1)) throw new Error('--runs must be >= 1');
  if (duration !== undefined && !(duration > 0)) throw new Error('--duration must be > 0');
  return {
    baseUrl: values['base-url'].replace(/\/+$/, ''),
    concurrency,
    runs,
    duration,
    warmup: Math.max(0, Number.parseInt(values.warmup, 10) || 0),
    json: values.json,
    workspace: path.resolve(values.workspace),
    timeoutMs: Number.parseInt(values['timeout-ms'], 10),
  };
}

function procStatusKb(field) {
  try {
    const m = readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

// Resets the kernel's peak-RSS counter (VmHWM) to the current RSS (Linux >= 4.0), so that the
// VmHWM read after the load is the peak of the load alone, not of start-up.
function resetPeakRss() {
  try {
    const fd = openSync('/proc/self/clear_refs', 'w');
    try {
      writeSync(fd, '5');
    } finally {
      closeSync(fd);
    }
    return true;
  } catch {
    return false;
  }
}

const mb = (bytes) => bytes / (1024 * 1024);
const round = (x, digits = 3) => (x === null || x === undefined ? x : Number(x.toFixed(digits)));

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

async function mockStats(baseUrl) {
  try {
    const res = await fetch(new URL('/_mock/stats', baseUrl));
    if (!res.ok) return null;
    return await res.json();
  } catch {
    return null;
  }
}

function loadAverage() {
  return os.loadavg().map((x) => round(x, 2));
}

async function settle() {
  if (typeof globalThis.gc === 'function') {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 50));
    globalThis.gc();
  }
  await new Promise((r) => setTimeout(r, 200));
}

// Runs the benchmark for one peer and writes its report. `peer` is
// { name, versions: {pkg: version}, setup: async (options) => ({ runOnce, toolInvocations }) }.
export async function main(peer) {
  const options = parseOptions();
  const started = new Date();
  const agent = await peer.setup(options);

  const errorSamples = [];
  const checkedRun = async (index) => {
    const t0 = performance.now();
    let ok = false;
    try {
      const out = await agent.runOnce(index);
      if (typeof out.text !== 'string' || !out.text.includes(MOCK_ANSWER)) {
        throw new Error(`final answer lacks the mock's text: ${JSON.stringify(out.text)?.slice(0, 200)}`);
      }
      if (out.toolCalls !== 1) {
        throw new Error(`the read tool ran ${out.toolCalls} times in this run, expected 1`);
      }
      ok = true;
    } catch (e) {
      if (errorSamples.length < 5) errorSamples.push(String(e?.stack ?? e).slice(0, 600));
    }
    return { ok, ms: performance.now() - t0 };
  };

  // Warm-up: sequential runs, verified, not recorded. They load the SDKs' lazy modules, let V8
  // compile the hot paths and open a first connection, so that idle RSS is the memory of a
  // process that has done the work once.
  for (let i = 0; i < options.warmup; ++i) {
    const r = await checkedRun(-1 - i);
    if (!r.ok) {
      process.stderr.write(`warm-up run failed:\n${errorSamples.join('\n')}\n`);
      process.exit(1);
    }
  }
  const toolCallsBefore = agent.toolInvocations();

  await settle();
  const rssIdle = process.memoryUsage().rss;
  const vmRssIdleKb = procStatusKb('VmRSS');
  const hwmReset = resetPeakRss();
  const statsBefore = await mockStats(options.baseUrl);
  const loadBefore = loadAverage();

  let rssPeak = rssIdle;
  let heapPeak = process.memoryUsage().heapUsed;
  const sample = () => {
    const m = process.memoryUsage();
    if (m.rss > rssPeak) rssPeak = m.rss;
    if (m.heapUsed > heapPeak) heapPeak = m.heapUsed;
  };
  const sampler = setInterval(sample, 10);

  const latencies = [];
  let errors = 0;
  let next = 0;
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  const deadline = options.duration !== undefined ? t0 + options.duration * 1000 : Infinity;
  const more = () =>
    options.runs !== undefined ? next < options.runs : performance.now() < deadline;
  const worker = async () => {
    while (more()) {
      const index = next++;
      const r = await checkedRun(index);
      if (r.ok) latencies.push(r.ms);
      else ++errors;
    }
  };
  const workers = [];
  for (let i = 0; i < options.concurrency; ++i) workers.push(worker());
  await Promise.all(workers);
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  sample();
  clearInterval(sampler);

  const vmHwmKb = procStatusKb('VmHWM');
  const statsAfter = await mockStats(options.baseUrl);
  const loadAfter = loadAverage();
  if (hwmReset && vmHwmKb !== null) rssPeak = Math.max(rssPeak, vmHwmKb * 1024);

  const runs = next;
  const okRuns = latencies.length;
  const toolCallsTotal = agent.toolInvocations() - toolCallsBefore;
  latencies.sort((a, b) => a - b);
  const mockRequests =
    statsBefore && statsAfter ? statsAfter.completion_requests - statsBefore.completion_requests : null;
  const report = {
    peer: peer.name,
    concurrency: options.concurrency,
    runs,
    errors,
    runs_per_s: round(okRuns / elapsedS, 1),
    latency_ms: {
      p50: round(percentile(latencies, 50)),
      p90: round(percentile(latencies, 90)),
      p99: round(percentile(latencies, 99)),
      max: round(latencies.length ? latencies[latencies.length - 1] : null),
    },
    rss_idle_mb: round(mb(rssIdle), 1),
    rss_peak_mb: round(mb(rssPeak), 1),
    mem_per_concurrent_run_kb: round((rssPeak - rssIdle) / 1024 / options.concurrency, 1),
    // Extra detail (not part of the minimal format):
    duration_s: round(elapsedS),
    // CPU time of this process (user + system, all threads) per run: steadier than wall-clock
    // figures on a shared machine.
    cpu_ms_per_run: runs ? round((cpu.user + cpu.system) / 1000 / runs) : null,
    event_loop_utilization: round(elu.utilization),
    tool_calls: toolCallsTotal,
    mock_completion_requests: mockRequests,
    heap_used_peak_mb: round(mb(heapPeak), 1),
    vmhwm_reset: hwmReset,
    vmhwm_mb: vmHwmKb === null ? null : round(vmHwmKb / 1024, 1),
    vmrss_idle_mb: vmRssIdleKb === null ? null : round(vmRssIdleKb / 1024, 1),
    warmup_runs: options.warmup,
    load_average_before: loadBefore,
    load_average_after: loadAfter,
    versions: { node: process.version, ...peer.versions },
    command: [
      process.argv0,
      ...process.execArgv,
      path.relative(process.cwd(), process.argv[1]),
      ...process.argv.slice(2),
    ].join(' '),
    cwd: process.cwd(),
    started_at: started.toISOString(),
    error_samples: errorSamples,
  };

  // Checks on the whole load, beyond the per-run ones: the read tool really ran once per run
  // (counted inside the tool function), and the mock saw two completion requests per run.
  const problems = [];
  if (errors === 0 && toolCallsTotal !== runs) {
    problems.push(`the read tool ran ${toolCallsTotal} times for ${runs} runs`);
  }
  if (mockRequests !== null && errors === 0 && mockRequests !== 2 * runs) {
    problems.push(`mock-llm saw ${mockRequests} completion requests for ${runs} runs (expected ${2 * runs})`);
  }
  report.problems = problems;

  if (options.json) {
    mkdirSync(path.dirname(path.resolve(options.json)), { recursive: true });
    writeFileSync(options.json, JSON.stringify(report, null, 2) + '\n');
  }
  const l = report.latency_ms;
  process.stdout.write(
    `${report.peer} c=${report.concurrency} runs=${runs} errors=${errors} ` +
      `${report.runs_per_s} runs/s  latency ms p50 ${l.p50} p90 ${l.p90} p99 ${l.p99} max ${l.max}  ` +
      `rss idle ${report.rss_idle_mb} MB peak ${report.rss_peak_mb} MB  ` +
      `${report.mem_per_concurrent_run_kb} KB/concurrent run  cpu ${report.cpu_ms_per_run} ms/run  ` +
      `tool calls ${toolCallsTotal}` +
      (mockRequests !== null ? `  mock requests ${mockRequests}` : '') +
      (problems.length ? `  PROBLEMS: ${problems.join('; ')}` : '') +
      '\n',
  );
  if (errorSamples.length) process.stderr.write(`first errors:\n${errorSamples.join('\n---\n')}\n`);
  return errors === 0 && problems.length === 0 ? 0 : 1;
}
