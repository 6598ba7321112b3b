// OpenClaw for the bench's channel scenario (README.md, "Channel half"): starts the gateway with
// its Telegram channel pointed at a local fake of the Bot API (channels.telegram.apiRoot) and
// its model at troupe's mock-llm, prints one line
//   openclaw-ready {"pid": <gateway pid>, "startup_ms": …, "versions": {…}, "config": {…}}
// and keeps it running until stdin closes or SIGTERM/SIGINT arrives; then stops the gateway
// and its helpers and removes the state directory. `troupe bench --scenario channel
// --channel-type telegram --peers bench/peers` runs it.
//
//   node channel.mjs --mock-base-url http://127.0.0.1:P/v1 --api-root http://127.0.0.1:Q \
//       --bot-token 123456:BENCH-bot-token

import { parseArgs } from 'node:util';

import { startGateway, versions } from './gateway.mjs';

const { values } = parseArgs({
  options: {
    'mock-base-url': { type: 'string' },
    'api-root': { type: 'string' },
    'bot-token': { type: 'string' },
    'keep-state': { type: 'boolean', default: false },
  },
  strict: true,
});
for (const k of ['mock-base-url', 'api-root', 'bot-token']) {
  if (!values[k]) {
    process.stderr.write(`channel.mjs: --${k} is required\n`);
    process.exit(2);
  }
}

let gw = null;
let stopping = false;
const stop = async (code) => {
  if (stopping) return;
  stopping = true;
  if (gw) await gw.stop();
  process.exit(code);
};
process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));
process.stdin.on('end', () => stop(0));
process.stdin.on('error', () => stop(0));
process.stdin.resume();

try {
  gw = await startGateway({
    mockBaseUrl: values['mock-base-url'],
    toolProfile: 'minimal',
    keep: values['keep-state'],
    telegram: { botToken: values['bot-token'], apiRoot: values['api-root'] },
  });
} catch (e) {
  process.stderr.write(`channel.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
}
if (stopping) {
  await gw.stop();
  process.exit(0);
}
const config = { ...gw.config, gateway: { ...gw.config.gateway, auth: { mode: 'token', token: '(random per run)' } } };
config.channels.telegram = { ...config.channels.telegram, botToken: '(the bench fake\'s token)' };
process.stdout.write(
  `openclaw-ready ${JSON.stringify({
    pid: gw.pid,
    origin: gw.origin,
    startup_ms: Math.round(gw.startupMs),
    state_dir: gw.stateDir,
    versions: { ...versions() },
    config,
  })}\n`,
);
