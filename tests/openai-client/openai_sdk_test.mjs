// Drives troupe's OpenAI-compatible endpoint with the official `openai` npm package:
// starts a scripted `troupe mock-llm` (the model) and `troupe serve` (an agent whose run
// calls a tool), then lists models and runs whole and streamed completions.
//
//   node openai_sdk_test.mjs /path/to/troupe
//
// Exits 0 when every check holds; prints what failed otherwise.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

let OpenAI;
try {
  ({ default: OpenAI } = await import("openai"));
} catch (e) {
  console.error(
    "the openai package is not installed in tests/openai-client: run `make test` " +
      "(it runs npm ci there) or `npm ci --prefix tests/openai-client`\n" + e.message,
  );
  process.exit(1);
}

const troupe = process.argv[2];
if (!troupe) {
  console.error("usage: node openai_sdk_test.mjs /path/to/troupe");
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), "troupe-openai-"));
const children = [];
const outputs = [];

function start(args, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(troupe, args, { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let seen = "";
    const record = { name: args[0], text: "" };
    outputs.push(record);
    const timer = setTimeout(() => reject(new Error(`no ready line from ${args[0]}:\n${seen}`)), 20000);
    const onData = (chunk) => {
      seen += chunk.toString();
      record.text += chunk.toString();
      const m = seen.match(ready);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => reject(new Error(`${args[0]} exited with ${code}:\n${seen}`)));
  });
}

// Stops every child with SIGTERM and waits for it; true when all exited 0.
async function stopAll() {
  const exits = children.map(
    (c) =>
      new Promise((resolve) => {
        if (c.exitCode !== null) return resolve(c.exitCode);
        c.on("exit", (code) => resolve(code));
        c.kill("SIGTERM");
      }),
  );
  const codes = await Promise.all(exits);
  rmSync(work, { recursive: true, force: true });
  return codes.every((code) => code === 0);
}

let failed = false;
try {
  const script = join(work, "script.json");
  writeFileSync(
    script,
    JSON.stringify([
      {
        match: { user: "make a file", has_tool_result: false },
        reply: {
          tool_calls: [
            { name: "write", arguments: { path: "report.csv", content: "region,total\nnorth,3\n" } },
          ],
        },
      },
      { match: { user: "make a file", has_tool_result: true }, reply: { text: "Wrote report.csv with the totals." } },
    ]),
  );
  const mockAddress = await start(
    ["mock-llm", "--listen", "127.0.0.1:0", "--script", script],
    /listening on http:\/\/(127\.0\.0\.1:\d+)/,
  );
  const data = join(work, "data");
  const config = join(work, "troupe.toml");
  writeFileSync(
    config,
    [
      'listen = "127.0.0.1:0"',
      `data_dir = "${data}"`,
      "[[providers]]",
      'name = "mock"',
      'type = "openai-compatible"',
      `base_url = "http://${mockAddress}/v1"`,
      "[[agents]]",
      'name = "worker"',
      'provider = "mock"',
      'model = "mock-llm"',
      'tools = ["write", "read", "finish"]',
      "",
    ].join("\n"),
  );
  const troupeAddress = await start(["serve", "--config", config], /listening on http:\/\/(127\.0\.0\.1:\d+)/);
  const token = readFileSync(join(data, "admin.token"), "utf8").trim();
  const client = new OpenAI({ baseURL: `http://${troupeAddress}/v1`, apiKey: token, maxRetries: 0, timeout: 30000 });

  // Models are the agents this token may use.
  const models = await client.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  assert.ok(ids.includes("worker"), `models: ${ids}`);

  // Whole: the agent calls its write tool server-side, then answers.
  const whole = await client.chat.completions.create({
    model: "worker",
    messages: [{ role: "user", content: "make a file" }],
  });
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.choices[0].finish_reason, "stop");
  assert.match(whole.choices[0].message.content, /Wrote report\.csv with the totals\./);
  assert.ok(whole.usage.total_tokens > 0, "usage.total_tokens");

  // Streamed, with usage.
  const stream = await client.chat.completions.create({
    model: "worker",
    messages: [
      { role: "system", content: "be brief" },
      { role: "user", content: "make a file" },
    ],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.delta?.content ?? "";
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.ok(chunks >= 3, `chunks: ${chunks}`);
  assert.match(text, /Wrote report\.csv with the totals\./);
  assert.equal(finish, "stop");
  assert.ok(usage && usage.total_tokens > 0, "streamed usage");

  // An unknown model is the SDK's NotFoundError.
  await assert.rejects(
    client.chat.completions.create({ model: "nobody", messages: [{ role: "user", content: "x" }] }),
    (e) => e.status === 404,
  );
  // A wrong key is 401.
  const stranger = new OpenAI({ baseURL: `http://${troupeAddress}/v1`, apiKey: "trp_wrong", maxRetries: 0 });
  await assert.rejects(stranger.models.list(), (e) => e.status === 401);
  console.log(`openai SDK against troupe: models, whole and streamed completions OK (${chunks} chunks)`);
} catch (e) {
  failed = true;
  console.error("FAILED:", e);
}
const clean = await stopAll();
if (!clean) {
  failed = true;
  console.error("FAILED: a troupe process did not exit 0 on SIGTERM");
}
for (const o of outputs) {
  // The sanitizer build reports here.
  if (/Sanitizer|runtime error/.test(o.text)) {
    failed = true;
    console.error(`FAILED: ${o.name} reported:\n${o.text}`);
  }
}
process.exit(failed ? 1 : 0);
