// The official MCP TypeScript SDK's client against troupe as an MCP server: it lists and
// calls `ask_<agent>` over Streamable HTTP at /mcp, and over stdio through
// `troupe mcp serve` (relaying to the running node, and running a node of its own).
// A scripted `troupe mock-llm` is the model; the agent writes a file, so the answer
// carries a signed link.
//
//   node sdk_client_test.mjs /path/to/troupe
//
// Exits 0 when every check holds, 77 (skipped) when the SDK is not installed, 1 otherwise.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

let Client, StreamableHTTPClientTransport, StdioClientTransport;
try {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
  ({ StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js"));
} catch (e) {
  console.log(
    "SKIPPED: @modelcontextprotocol/sdk is not installed in tests/mcp (make npm-deps, or " +
      "npm ci --prefix tests/mcp): " + e.message,
  );
  process.exit(77);
}

const troupe = process.argv[2];
if (!troupe) {
  console.error("usage: node sdk_client_test.mjs /path/to/troupe");
  process.exit(2);
}

const work = mkdtempSync(join(tmpdir(), "troupe-mcp-sdk-"));
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

function config(name, mockAddress) {
  const path = join(work, `${name}.toml`);
  writeFileSync(
    path,
    [
      'listen = "127.0.0.1:0"',
      `data_dir = "${join(work, name)}"`,
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
  return path;
}

// Checks one ask_worker call's result: the answer, a link to the file, structured content.
async function checkAnswer(result, origin) {
  assert.equal(result.isError, false, JSON.stringify(result));
  const text = result.content.find((c) => c.type === "text");
  assert.equal(text.text, "Wrote report.csv with the totals.");
  const link = result.content.find((c) => c.type === "resource_link");
  assert.ok(link, "a resource link to the file: " + JSON.stringify(result.content));
  assert.equal(link.name, "report.csv");
  assert.match(link.uri, /\/api\/v1\/files\/[^/]+\/content\?expires=\d+&sig=/);
  assert.equal(result.structuredContent.status, "succeeded");
  assert.ok(result.structuredContent.conversation_id);
  if (origin) {
    // The signed link works without a token.
    const file = await fetch(link.uri);
    assert.equal(file.status, 200);
    assert.equal(await file.text(), "region,total\nnorth,3\n");
  }
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
  const main = config("main", mockAddress);
  const address = await start(["serve", "--config", main], /listening on http:\/\/(127\.0\.0\.1:\d+)/);
  const token = readFileSync(join(work, "main", "admin.token"), "utf8").trim();
  const endpoint = `http://${address}/mcp`;

  // 1. Streamable HTTP at /mcp, with the API's bearer token.
  {
    const client = new Client({ name: "sdk-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    await client.connect(transport);
    assert.equal(client.getServerVersion().name, "troupe");
    const { tools } = await client.listTools();
    const ask = tools.find((t) => t.name === "ask_worker");
    assert.ok(ask, "ask_worker is listed: " + JSON.stringify(tools));
    assert.deepEqual(ask.inputSchema.required, ["message"]);
    const progress = [];
    const result = await client.callTool(
      { name: "ask_worker", arguments: { message: "make a file" } },
      undefined,
      { onprogress: (p) => progress.push(p), timeout: 60000 },
    );
    await checkAnswer(result, `http://${address}`);
    assert.ok(progress.length >= 2, "progress notifications while it ran: " + JSON.stringify(progress));
    assert.ok(progress.some((p) => /calling write/.test(p.message ?? "")), JSON.stringify(progress));
    // Continuing the same conversation.
    const again = await client.callTool(
      {
        name: "ask_worker",
        arguments: { message: "make a file", conversation_id: result.structuredContent.conversation_id },
      },
      undefined,
      { timeout: 60000 },
    );
    assert.equal(again.structuredContent.conversation_id, result.structuredContent.conversation_id);
    // An unknown tool is an error the SDK reports.
    await assert.rejects(client.callTool({ name: "ask_nobody", arguments: { message: "x" } }), /Unknown tool/);
    await transport.terminateSession();
    await client.close();
  }

  // 2. What /mcp refuses: no token, a foreign Origin (DNS rebinding), an unknown session.
  {
    const init = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    const anonymous = await fetch(endpoint, { method: "POST", headers, body: init });
    assert.equal(anonymous.status, 401);
    const foreign = await fetch(endpoint, {
      method: "POST",
      headers: { ...headers, Authorization: `Bearer ${token}`, Origin: "http://evil.example" },
      body: init,
    });
    assert.equal(foreign.status, 403);
    const stale = await fetch(endpoint, {
      method: "POST",
      headers: { ...headers, Authorization: `Bearer ${token}`, "Mcp-Session-Id": "no-such-session" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    assert.equal(stale.status, 404);
  }

  // 3. stdio: `troupe mcp serve` relaying to the running node.
  {
    const client = new Client({ name: "sdk-stdio", version: "1.0.0" });
    const transport = new StdioClientTransport({
      command: troupe,
      args: ["mcp", "serve", "--url", endpoint, "--token", token],
      stderr: "inherit",
    });
    await client.connect(transport);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "ask_worker"));
    const progress = [];
    const result = await client.callTool(
      { name: "ask_worker", arguments: { message: "make a file" } },
      undefined,
      { onprogress: (p) => progress.push(p), timeout: 60000 },
    );
    await checkAnswer(result, `http://${address}`);
    assert.ok(progress.length >= 2, JSON.stringify(progress));
    await client.close();
  }

  // 4. stdio: `troupe mcp serve` running a node of its own from a config.
  {
    const own = config("own", mockAddress);
    const client = new Client({ name: "sdk-own", version: "1.0.0" });
    const transport = new StdioClientTransport({
      command: troupe,
      args: ["mcp", "serve", "--config", own],
      stderr: "inherit",
    });
    await client.connect(transport);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "ask_worker"));
    const result = await client.callTool(
      { name: "ask_worker", arguments: { message: "make a file" } },
      undefined,
      { timeout: 60000 },
    );
    await checkAnswer(result, null);
    await client.close();
  }
  console.log("ok: the MCP SDK client listed and called ask_worker over /mcp and over troupe mcp serve");
} catch (e) {
  failed = true;
  console.error("FAILED:", e);
  for (const o of outputs) {
    console.error(`--- ${o.name} output ---\n${o.text}`);
  }
}
const clean = await stopAll();
if (!clean && !failed) {
  console.error("FAILED: a child process did not exit cleanly");
  failed = true;
}
process.exit(failed ? 1 : 0);
