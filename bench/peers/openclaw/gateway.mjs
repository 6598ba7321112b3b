// OpenClaw's gateway as a process the bench starts and stops: the generated config
// (README.md explains every key), a state directory under /tmp, readiness, and /proc readings
// of the gateway with its helper processes.
//
// No npm dependencies: only node: built-ins. The gateway itself runs on the Node 24 of
// ./runtime (the npm package `node`); this file runs on any Node >= 20.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const NODE_BIN = path.join(here, 'runtime', 'node_modules', '.bin', 'node');
export const OPENCLAW_ENTRY = path.join(here, 'node_modules', 'openclaw', 'openclaw.mjs');

/// The provider and model the gateway's agent uses: troupe's mock-llm over the OpenAI Chat
/// Completions wire.
export const MOCK_PROVIDER = 'troupe-mock';
export const MOCK_MODEL = 'mock-llm';

/// Checks that `make bench-peers` (or the two `npm ci`) ran.
export function checkInstalled() {
  const missing = [];
  for (const f of [NODE_BIN, OPENCLAW_ENTRY]) {
    try {
      readFileSync(f, { flag: 'r' });
    } catch {
      missing.push(f);
    }
  }
  if (missing.length) {
    throw new Error(
      `OpenClaw is not installed (missing ${missing.join(', ')}): run make bench-peers, or\n` +
        '  npm ci --prefix bench/peers/openclaw/runtime\n' +
        '  PATH=$PWD/bench/peers/openclaw/runtime/node_modules/.bin:$PATH npm ci --prefix bench/peers/openclaw',
    );
  }
}

export function versions() {
  const version = (file) => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')).version;
    } catch {
      return null;
    }
  };
  return {
    openclaw: version(path.join(here, 'node_modules', 'openclaw', 'package.json')),
    'node (gateway)': version(path.join(here, 'runtime', 'node_modules', 'node', 'package.json')),
  };
}

/// A free TCP port on 127.0.0.1 (the gateway takes its port from the config, not from 0).
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/// The gateway's config (openclaw.json). Every key is explained in README.md.
///   mockBaseUrl  the mock-llm's /v1 URL
///   telegram     {botToken, apiRoot} to enable the Telegram channel against a Bot API fake
export function makeConfig({ port, token, mockBaseUrl, stateDir, workspace, toolProfile = 'minimal', telegram }) {
  const config = {
    gateway: {
      mode: 'local',
      port,
      bind: 'loopback',
      auth: { mode: 'token', token },
      controlUi: { enabled: false },
      http: { endpoints: { chatCompletions: { enabled: true } } },
    },
    update: { checkOnStart: false },
    telemetry: { enabled: false },
    diagnostics: { enabled: false },
    discovery: { mdns: { mode: 'off' } },
    cron: { enabled: false },
    logging: { file: path.join(stateDir, 'logs', 'openclaw.log'), level: 'info' },
    models: {
      mode: 'replace',
      catalogRefresh: { enabled: false },
      providers: {
        [MOCK_PROVIDER]: {
          baseUrl: mockBaseUrl,
          apiKey: 'mock-llm-needs-no-key',
          api: 'openai-completions',
          models: [
            {
              id: MOCK_MODEL,
              name: 'troupe mock-llm (canned answers, not a model)',
              reasoning: false,
              input: ['text'],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              contextWindow: 128000,
              maxTokens: 4096,
            },
          ],
        },
      },
    },
    agents: {
      defaults: {
        model: { primary: `${MOCK_PROVIDER}/${MOCK_MODEL}` },
        workspace,
        skipBootstrap: true,
        skills: [],
        heartbeat: { every: '0m' },
      },
    },
    tools: { profile: toolProfile },
    plugins: { slots: { memory: 'none' } },
  };
  if (telegram) {
    config.channels = {
      telegram: {
        enabled: true,
        botToken: telegram.botToken,
        apiRoot: telegram.apiRoot,
        dmPolicy: 'open',
        allowFrom: ['*'],
        groupPolicy: 'disabled',
        streaming: { mode: 'off' },
        commands: { native: false },
        replyToMode: 'off',
      },
    };
    config.session = { dmScope: 'per-channel-peer' };
  }
  return config;
}

/// Environment of the gateway: its state under `stateDir`, nothing from ~/.openclaw, no
/// update or telemetry requests, no mDNS; Node 24 first on PATH for anything it spawns.
export function gatewayEnv(stateDir) {
  const env = {};
  for (const k of ['LANG', 'LC_ALL', 'TZ', 'TMPDIR']) if (process.env[k]) env[k] = process.env[k];
  return {
    ...env,
    PATH: `${path.dirname(NODE_BIN)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: stateDir,
    OPENCLAW_HOME: stateDir,
    OPENCLAW_STATE_DIR: stateDir,
    OPENCLAW_CONFIG_PATH: path.join(stateDir, 'openclaw.json'),
    OPENCLAW_NO_AUTO_UPDATE: '1',
    OPENCLAW_DISABLE_BONJOUR: '1',
    DO_NOT_TRACK: '1',
    NO_COLOR: '1',
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Starts `openclaw gateway run` with a generated config in a fresh temporary directory and
/// waits until its OpenAI-compatible route answers. Returns
/// {pid, origin, token, stateDir, config, startupMs, stop(), logTail()}.
export async function startGateway({ mockBaseUrl, toolProfile, telegram, readyTimeoutMs = 600_000, keep = false }) {
  checkInstalled();
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'troupe-bench-openclaw-'));
  const workspace = path.join(stateDir, 'workspace');
  mkdirSync(workspace, { recursive: true });
  mkdirSync(path.join(stateDir, 'logs'), { recursive: true });
  const port = await freePort();
  const token = randomBytes(24).toString('hex');
  const config = makeConfig({ port, token, mockBaseUrl, stateDir, workspace, toolProfile, telegram });
  writeFileSync(path.join(stateDir, 'openclaw.json'), JSON.stringify(config, null, 2) + '\n');
  const logPath = path.join(stateDir, 'gateway.out');
  const out = openSync(logPath, 'a');
  const t0 = performance.now();
  const child = spawn(NODE_BIN, [OPENCLAW_ENTRY, 'gateway', 'run'], {
    cwd: stateDir,
    env: gatewayEnv(stateDir),
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  let exited = null;
  child.on('exit', (code, signal) => {
    exited = { code, signal };
  });
  const origin = `http://127.0.0.1:${port}`;
  const logTail = () => {
    try {
      return readFileSync(logPath, 'utf8').split('\n').slice(-30).join('\n');
    } catch {
      return '';
    }
  };
  const stop = async () => {
    const tree = processTree(child.pid);
    if (exited === null) {
      child.kill('SIGTERM');
      for (let i = 0; i < 300 && exited === null; ++i) await sleep(100);
    }
    // Helpers the gateway left behind (by pid, only this gateway's tree).
    for (const pid of tree) {
      try {
        process.kill(pid, 0);
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if (!keep) rmSync(stateDir, { recursive: true, force: true });
    return exited;
  };
  const deadline = t0 + readyTimeoutMs;
  for (;;) {
    if (exited !== null) {
      const tail = logTail();
      await stop();
      throw new Error(`openclaw gateway exited during start-up (${JSON.stringify(exited)}):\n${tail}`);
    }
    try {
      const res = await fetch(`${origin}/v1/models`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(5_000),
      });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline) {
      const tail = logTail();
      await stop();
      throw new Error(`openclaw gateway not ready after ${readyTimeoutMs} ms:\n${tail}`);
    }
    await sleep(250);
  }
  return {
    pid: child.pid,
    origin,
    token,
    stateDir,
    config,
    startupMs: performance.now() - t0,
    stop,
    logTail,
  };
}

// -- /proc readings of a process tree --

/// `pid` and all its descendants (threads excluded), from /proc/<pid>/task/*/children.
export function processTree(pid) {
  const out = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift();
    out.push(p);
    let tasks = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        const kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim();
        if (kids) for (const k of kids.split(/\s+/)) queue.push(Number(k));
      } catch {
        // task ended
      }
    }
  }
  return out;
}

function statusKb(pid, field) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function pssKb(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+) kB/m);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

const CLK_TCK = 100; // sysconf(_SC_CLK_TCK) on Linux x86-64

/// CPU time (user + system, ms) of a process, including its reaped children.
function cpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields after ")": state(0) ... utime(11) stime(12) cutime(13) cstime(14)
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    return (ticks * 1000) / CLK_TCK;
  } catch {
    return 0;
  }
}

/// Memory and CPU of the whole tree under `pid`: RSS summed over the processes (shared pages
/// counted once per process), PSS summed (shared pages split), CPU ms summed.
export function treeStats(pid) {
  const pids = processTree(pid);
  let rssKb = 0;
  let pss = 0;
  let cpu = 0;
  const processes = [];
  for (const p of pids) {
    const rss = statusKb(p, 'VmRSS');
    rssKb += rss;
    pss += pssKb(p);
    cpu += cpuMs(p);
    processes.push({ pid: p, rss_kb: rss });
  }
  return { pids, rssKb, pssKb: pss, cpuMs: cpu, processes };
}

/// Resets VmHWM of every process of the tree (clear_refs 5), so that the sum of VmHWM read
/// later bounds the load's peak (each process's own peak; they need not coincide).
export function resetTreePeaks(pid) {
  let all = true;
  for (const p of processTree(pid)) {
    try {
      const fd = openSync(`/proc/${p}/clear_refs`, 'w');
      try {
        writeSync(fd, '5');
      } finally {
        closeSync(fd);
      }
    } catch {
      all = false;
    }
  }
  return all;
}

export function treeHwmKb(pid) {
  return processTree(pid).reduce((sum, p) => sum + statusKb(p, 'VmHWM'), 0);
}

/// Samples the tree's summed RSS every `ms` until stopped; `peakKb` is the largest sum seen.
export function startTreeSampler(pid, ms = 50) {
  const state = { peakKb: 0, peakPssKb: 0, samples: 0 };
  const tick = () => {
    const s = treeStats(pid);
    state.samples++;
    if (s.rssKb > state.peakKb) state.peakKb = s.rssKb;
    if (s.pssKb > state.peakPssKb) state.peakPssKb = s.pssKb;
  };
  tick();
  const timer = setInterval(tick, ms);
  return {
    state,
    stop() {
      clearInterval(timer);
      tick();
      return state;
    },
  };
}

export function loadavg() {
  try {
    return readFileSync('/proc/loadavg', 'utf8').trim();
  } catch {
    return null;
  }
}
