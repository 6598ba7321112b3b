// End-to-end tests of troupe's web console in Debian's headless Chromium, driven by
// playwright-core, against the real `troupe serve` binary and a scripted `troupe mock-llm`:
// sign in, stream a slow answer (tokens seen before the run ends), a correction shown
// honestly, a CSV uploaded and the agent's chart downloaded (the code interpreter in the
// real sandbox), a message queued under `interrupt`, a run stopped, its timeline live and
// after, the overview's charts, a memory candidate approved, a pending tool call approved
// from the inbox, the settings' forms showing
// the API's errors, 375 px and the dark theme, and the first paint with 1,000
// conversations (seeded through the API), measured in the browser.
//
//   node console_test.mjs /path/to/troupe <output dir> [--screenshots <dir>]
//
// Every page's screenshot goes to the screenshot directory (default <output dir>/
// screenshots; `make console-screenshots` writes docs/console/). A failing step saves
// <output dir>/failures/<step>.png and the page's console messages. Exits 0 when every
// step passed, 1 otherwise, 77 when playwright-core or Chromium is missing.

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

const CHROMIUM = process.env.TROUPE_CHROMIUM ?? "/usr/bin/chromium";
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  console.log(`SKIP: playwright-core is not installed in tests/console (make test runs npm ci there): ${e.message}`);
  process.exit(77);
}
if (!existsSync(CHROMIUM)) {
  console.log(`SKIP: ${CHROMIUM} is missing (make deps installs Debian's chromium)`);
  process.exit(77);
}

const args = process.argv.slice(2);
const troupe = args[0];
const outDir = args[1] ?? join(tmpdir(), "troupe-console-test");
const shotsAt = args.indexOf("--screenshots");
const shotDir = shotsAt >= 0 ? args[shotsAt + 1] : join(outDir, "screenshots");
if (!troupe) {
  console.error("usage: node console_test.mjs /path/to/troupe <output dir> [--screenshots <dir>]");
  process.exit(2);
}
mkdirSync(join(outDir, "failures"), { recursive: true });
mkdirSync(shotDir, { recursive: true });

const work = mkdtempSync(join(tmpdir(), "troupe-console-"));
const children = [];
const outputs = [];

function start(argv, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(troupe, argv, { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    const record = { name: argv[0], text: "" };
    outputs.push(record);
    const timer = setTimeout(() => reject(new Error(`no ready line from ${argv[0]}:\n${record.text}`)), 30000);
    const onData = (chunk) => {
      record.text += chunk.toString();
      const m = record.text.match(ready);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => reject(new Error(`${argv[0]} exited with ${code}:\n${record.text}`)));
  });
}

async function stopAll() {
  const codes = await Promise.all(
    children.map(
      (c) =>
        new Promise((resolve) => {
          if (c.exitCode !== null) return resolve(c.exitCode);
          c.on("exit", (code) => resolve(code));
          c.kill("SIGTERM");
        }),
    ),
  );
  return codes.every((code) => code === 0);
}

// --- the model's script ---

const words = (n, stem) => Array.from({ length: n }, (_, i) => `${stem}${i + 1}`).join(" ");
const STORY = `Once upon a time a small troupe of agents ${words(24, "w")} and they lived happily.`;
const chartCode = [
  "import pandas as pd",
  "import matplotlib",
  "matplotlib.use('Agg')",
  "import matplotlib.pyplot as plt",
  "df = pd.read_csv('sales.csv')",
  "totals = df.groupby('region', as_index=False)['amount'].sum()",
  "totals.to_csv('totals.csv', index=False)",
  "totals.plot.bar(x='region', y='amount')",
  "plt.savefig('totals.png')",
  "print(totals.to_string(index=False))",
].join("\n");
const script = [
  { match: { user: "tell me a story slowly" }, reply: { text: STORY }, token_delay_ms: 120 },
  { match: { user: "You described what you are going to do" }, reply: { text: "Here is the finished story: the troupe performed." } },
  { match: { user: "write the story" }, reply: { text: "I will now write the story for you." }, token_delay_ms: 40 },
  { match: { user: "compute the totals", has_tool_result: false }, reply: { tool_calls: [{ name: "code_interpreter", arguments: { language: "python", code: chartCode } }] } },
  { match: { user: "compute the totals", has_tool_result: true }, reply: { text: "The totals by region are in totals.csv, with a bar chart in totals.png." } },
  { match: { user: "talk for a long time" }, reply: { text: words(400, "long") }, token_delay_ms: 150 },
  { match: { user: "seed" }, reply: { text: "Seeded." } },
  {
    match: { user: "split the work", has_tool_result: false },
    reply: { tool_calls: [{ name: "sub_agent", arguments: { tasks: [{ objective: "count the apples" }, { objective: "count the pears", mode: "explore" }] } }] },
  },
  { match: { user: "split the work", has_tool_result: true }, reply: { text: "Apples 12, pears 7." } },
  { match: { user: "count the apples" }, reply: { text: "12 apples." }, token_delay_ms: 30 },
  { match: { user: "count the pears" }, reply: { text: "7 pears." } },
  { match: { user: "save the release note", has_tool_result: false }, reply: { tool_calls: [{ name: "write", arguments: { path: "release-note.txt", content: "troupe 1.0 is out" } }] } },
  { match: { user: "save the release note", has_tool_result: true }, reply: { text: "Saved release-note.txt." } },
];

// --- steps ---

const results = [];
let page = null;
let pageLog = [];

async function step(name, fn) {
  const started = Date.now();
  try {
    await fn();
    results.push({ name, ok: true, ms: Date.now() - started });
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    results.push({ name, ok: false, ms: Date.now() - started, error: e });
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    const file = join(outDir, "failures", `${name.replace(/[^a-z0-9]+/gi, "-")}.png`);
    try {
      if (page) {
        await page.screenshot({ path: file, fullPage: true });
        console.log(`     screenshot: ${file}`);
      }
    } catch (shot) {
      console.log(`     (no screenshot: ${shot.message})`);
    }
    if (pageLog.length) console.log(`     browser console:\n       ${pageLog.slice(-20).join("\n       ")}`);
  }
}

async function shot(name) {
  await page.screenshot({ path: join(shotDir, `${name}.png`) });
}

let base = "";
let token = "";
async function call(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, json, text, headers: res.headers };
}

/// Polls `f` until it returns a truthy value, within `ms`.
async function until(f, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let browser;
let failed = false;
try {
  const scriptFile = join(work, "script.json");
  writeFileSync(scriptFile, JSON.stringify(script));
  const mock = await start(["mock-llm", "--listen", "127.0.0.1:0", "--script", scriptFile], /listening on http:\/\/(127\.0\.0\.1:\d+)/);
  const data = join(work, "data");
  // Two skills in the default folder (<data_dir>/skills): one that loads, one whose front
  // matter is not YAML (listed as a problem with its file and line).
  mkdirSync(join(data, "skills", "greet"), { recursive: true, mode: 0o700 });
  writeFileSync(join(data, "skills", "greet", "SKILL.md"), "---\nname: greet\ndescription: Greets a person by name, in their language.\ntriggers: [hello, greeting]\n---\n# Greet\nSay hello in the user's language.\n");
  mkdirSync(join(data, "skills", "broken"), { recursive: true, mode: 0o700 });
  writeFileSync(join(data, "skills", "broken", "SKILL.md"), "---\nname: broken\ndescription: [unclosed\n---\nbody\n");
  writeFileSync(
    join(work, "troupe.toml"),
    [
      'listen = "127.0.0.1:0"',
      `data_dir = "${data}"`,
      "[api]",
      // Seeding 1,000 conversations goes faster than the default per-token rate.
      "rate_per_second = 2000",
      "rate_burst = 2000",
      "max_upload_bytes = 1000000",
      "[[providers]]",
      'name = "mock"',
      'type = "openai-compatible"',
      `base_url = "http://${mock}/v1"`,
      "[[agents]]",
      'name = "analyst"',
      'provider = "mock"',
      'model = "mock-llm"',
      'tools = ["code_interpreter", "read", "write", "finish"]',
      // Every write of this agent waits for a human (issue 19): the approvals inbox.
      "[[agents]]",
      'name = "gatekeeper"',
      'provider = "mock"',
      'model = "mock-llm"',
      'tools = ["write", "finish"]',
      'approval = { write = "always" }',
      "",
    ].join("\n"),
  );
  const address = await start(["serve", "--config", join(work, "troupe.toml")], /listening on http:\/\/(127\.0\.0\.1:\d+)/);
  base = `http://${address}`;
  token = readFileSync(join(data, "admin.token"), "utf8").trim();

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // The closed network: no background connections (machines/cpp.md); root: no sandbox.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
  page = await context.newPage();
  page.on("console", (m) => pageLog.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => pageLog.push(`pageerror: ${e.message}`));
  const cspViolations = [];
  await page.exposeFunction("reportCsp", (v) => cspViolations.push(v));
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => window.reportCsp(`${e.violatedDirective} ${e.blockedURI}`));
  });

  await step("the page is served with its security headers and assets", async () => {
    const res = await fetch(base + "/");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-security-policy"), /default-src 'self'/);
    assert.doesNotMatch(res.headers.get("content-security-policy"), /unsafe-inline/);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    assert.equal(res.headers.get("cache-control"), "no-cache");
    const html = await res.text();
    const app = html.match(/src="(\/console\/[0-9a-f]+\/app\.js)"/);
    assert.ok(app, "the page links its versioned app.js");
    const asset = await fetch(base + app[1]);
    assert.equal(asset.status, 200);
    assert.match(asset.headers.get("content-type"), /^text\/javascript/);
    assert.match(asset.headers.get("cache-control"), /immutable/);
  });

  await step("the console's CSV reader and histogram quantiles read what they are given", async () => {
    await page.goto(base + "/");
    const checks = await page.evaluate(async () => {
      const base = document.querySelector('script[type="module"]').src.replace(/app\.js$/, "");
      const { parseCsv } = await import(base + "csv.js");
      const { parseMetrics, buckets, quantile } = await import(base + "metrics.js");
      const rows = parseCsv('a,b\r\n"x, ""y""",2\n3,\n');
      const series = parseMetrics(
        '# TYPE h histogram\nh_bucket{le="0.1"} 1\nh_bucket{le="1"} 3\nh_bucket{le="+Inf"} 4\nh_sum 2\nh_count 4\ng{status="a b"} 7\n',
      );
      const b = buckets(series, "h");
      return { rows, p50: quantile(0.5, b), p99: quantile(0.99, b), label: series.find((x) => x.name === "g").labels.status };
    });
    assert.deepEqual(checks.rows, [["a", "b"], ['x, "y"', "2"], ["3", ""]]);
    assert.ok(Math.abs(checks.p50 - 0.55) < 1e-9, `p50 ${checks.p50}`); // rank 2 of 4: halfway into (0.1, 1]
    assert.equal(checks.p99, 1); // in the +Inf bucket: the last finite bound
    assert.equal(checks.label, "a b");
  });

  await step("sign in with a token (kept in sessionStorage, never in the URL)", async () => {
    await page.goto(base + "/");
    await page.waitForSelector("#token");
    await shot("signin");
    // A wrong token is refused with the reason, and nothing is stored.
    await page.fill("#token", "trp_wrong");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".signin .alert");
    assert.match(await page.textContent(".signin .alert"), /not valid/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("troupe.token")), null);
    // Keyboard only: the field has focus, Enter signs in.
    await page.fill("#token", token);
    await page.keyboard.press("Enter");
    await page.waitForSelector("nav.top");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("troupe.token")), token);
    assert.ok(!page.url().includes(token), "no token in the URL");
    assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing in localStorage");
  });

  let storyRun = null;
  await step("a message streams its answer: tokens appear before the run ends", async () => {
    await page.goto(base + "/#/chat/new");
    await page.waitForSelector("#agent");
    await page.fill("#message", "tell me a story slowly");
    await page.keyboard.press("Enter");
    // The first words arrive while the run is still running.
    const first = await page.waitForSelector(".msg.run .answer.streaming", { timeout: 30000 });
    const seen = await first.textContent();
    storyRun = await page.getAttribute(".msg.run", "data-run");
    const status = await call("GET", `/api/v1/runs/${storyRun}`);
    assert.equal(status.json.status, "running", `the run is ${status.json.status} when the first words show (${seen})`);
    assert.ok(seen.length > 0 && seen.length < STORY.length, `partial text seen: ${seen.length} of ${STORY.length} chars`);
    await shot("chat-streaming");
    await page.waitForSelector('.msg.run .badge.succeeded', { timeout: 60000 });
    assert.equal((await page.textContent('.msg.run .answer[data-candidate="accepted"]')).trim(), STORY);
  });

  await step("a rejected candidate is struck through with the harness's reason", async () => {
    await page.fill("#message", "write the story");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".msg.run .answer.rejected", { timeout: 30000 });
    const rejected = await page.textContent(".msg.run .answer.rejected");
    assert.match(rejected, /I will now write the story/);
    const reason = await page.textContent(".msg.run .correction");
    assert.match(reason, /final_answer_incomplete_progress/);
    await page.waitForSelector(".msg.run:last-child .badge.succeeded", { timeout: 30000 });
    assert.match(await page.textContent('.msg.run:last-child .answer[data-candidate="accepted"]'), /finished story/);
    await shot("chat-correction");
    // After a reload the stored run shows the same: the rejected text (replayed from its
    // events) struck through, and the reason.
    await page.reload();
    await page.waitForSelector(".msg.run .answer.rejected", { timeout: 30000 });
    assert.match(await page.textContent(".msg.run .correction"), /rejected/);
  });

  let chartRun = null;
  await step("a CSV goes up with the message and the agent's chart comes down", async () => {
    await page.goto(base + "/#/chat/new");
    await page.waitForSelector("#agent");
    const csv = "region,amount\nnorth,10\nsouth,5\nnorth,7\neast,1\nsouth,2\n";
    await page.setInputFiles("#attach", { name: "sales.csv", mimeType: "text/csv", buffer: Buffer.from(csv) });
    await page.waitForSelector('.chip[data-uploaded="true"]', { timeout: 30000 });
    await page.fill("#message", "compute the totals");
    await page.click("#send");
    await page.waitForSelector('.file[data-file="totals.png"] img', { timeout: 90000 });
    chartRun = await page.getAttribute(".msg.run", "data-run");
    // The preview shows (the image decoded), the CSV's too.
    await until(() => page.evaluate(() => document.querySelector('.file[data-file="totals.png"] img')?.naturalWidth > 0), 20000, "the chart preview");
    await page.waitForSelector('.file[data-file="totals.csv"] table td');
    assert.match(await page.textContent('.file[data-file="totals.csv"] table'), /north\s*17/);
    // The tool call is an expandable step with its arguments, output and duration.
    const stepEl = page.locator('details.step[data-tool="code_interpreter"]');
    await stepEl.locator("summary").click();
    assert.match(await stepEl.locator("pre.args").textContent(), /read_csv/);
    assert.match(await stepEl.locator(".dur").textContent(), /\d+(\.\d+)? (ms|s)/);
    await shot("chat-files");
    // The download link is the API's signed link: the bytes are the PNG.
    const [download] = await Promise.all([page.waitForEvent("download"), page.click('.file[data-file="totals.png"] a.download')]);
    const saved = join(work, "downloaded.png");
    await download.saveAs(saved);
    const bytes = readFileSync(saved);
    assert.equal(bytes.subarray(0, 8).toString("binary"), "\x89PNG\r\n\x1a\n");
    assert.equal(download.suggestedFilename(), "totals.png");
  });

  await step("a message sent under `interrupt` while a run is active cancels it and runs", async () => {
    await page.goto(base + "/#/chat/new");
    await page.waitForSelector("#agent");
    await page.fill("#message", "talk for a long time");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".msg.run .answer.streaming", { timeout: 30000 });
    // The queue policy and the stop button show only while a run is active.
    await page.waitForSelector("#queue-policy", { state: "visible" });
    await page.waitForSelector("#stop", { state: "visible" });
    await shot("chat-active-run");
    const first = await page.getAttribute(".msg.run", "data-run");
    await page.selectOption("#queue-policy", "interrupt");
    await page.fill("#message", "tell me a story slowly");
    await page.keyboard.press("Enter");
    await page.waitForSelector(`.msg.run[data-run="${first}"] .badge.cancelled`, { timeout: 30000 });
    await page.waitForSelector(".msg.run:last-child .badge.succeeded", { timeout: 60000 });
    assert.equal((await call("GET", `/api/v1/runs/${first}`)).json.status, "cancelled");
  });

  let cancelledRun = null;
  await step("the stop button cancels the active run", async () => {
    await page.fill("#message", "talk for a long time");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".msg.run:last-child .answer.streaming", { timeout: 30000 });
    cancelledRun = await page.getAttribute(".msg.run:last-child", "data-run");
    await page.click("#stop");
    await page.waitForSelector(".msg.run:last-child .badge.cancelled", { timeout: 30000 });
    assert.equal((await call("GET", `/api/v1/runs/${cancelledRun}`)).json.status, "cancelled");
    await page.waitForSelector("#stop", { state: "hidden" });
  });

  await step("a run's timeline shows its rounds, tool call and gates, and replays", async () => {
    await page.goto(base + "/#/chat");
    await page.waitForSelector(".conversations li a");
    // From the chat: the run's Timeline link.
    await page.goto(base + `/#/runs/${chartRun}`);
    await page.waitForSelector('.run-detail[data-complete="true"]', { timeout: 30000 });
    await until(async () => (await page.locator(".timeline rect.bar.llm").count()) >= 2, 10000, "two LLM round bars");
    assert.ok((await page.locator(".timeline rect.bar.tool").count()) >= 1, "a tool call bar");
    assert.ok((await page.locator(".timeline rect.mark.harness").count()) >= 3, "harness gates");
    assert.match(await page.textContent(".event-list"), /action\.finished/);
    await shot("run-timeline");
    // Replay: the position moves, later items are dimmed.
    await page.$eval("#replay", (el) => {
      el.value = "100";
      el.dispatchEvent(new Event("input"));
    });
    await until(async () => (await page.locator('.timeline g.item[opacity="0.15"]').count()) > 0, 5000, "dimmed items");
  });

  await step("a run's timeline is live while it runs", async () => {
    const created = await call("POST", "/api/v1/runs", { agent: "analyst", message: "talk for a long time" });
    assert.equal(created.status, 202);
    await page.goto(base + `/#/runs/${created.json.run_id}`);
    await page.waitForSelector("#run-status.running", { timeout: 30000 });
    await until(async () => (await page.locator(".timeline rect.bar.llm").count()) >= 1, 20000, "a streaming round bar");
    await shot("run-timeline-live");
    // Ended from outside (the API), the open timeline follows to the end.
    assert.equal((await call("DELETE", `/api/v1/runs/${created.json.run_id}`)).status, 202);
    await page.waitForSelector('.run-detail[data-complete="true"]', { timeout: 60000 });
    assert.equal(await page.textContent("#run-status"), "cancelled");
  });

  await step("a run's sub-agents are nested lanes under their call", async () => {
    const created = await call("POST", "/api/v1/runs", { agent: "analyst", message: "split the work" });
    assert.equal(created.status, 202, created.text);
    await page.goto(base + `/#/runs/${created.json.run_id}`);
    await page.waitForSelector('.run-detail[data-complete="true"]', { timeout: 60000 });
    assert.equal(await page.textContent("#run-status"), "succeeded");
    const lanes = await page.locator(".timeline .lane-label.nested").allTextContents();
    assert.deepEqual(lanes, ["↳ sub-agent 1", "↳ sub-agent 2"]);
    const titles = await page.locator(".timeline rect.bar.sub title").allTextContents();
    assert.ok(titles.some((t) => t.includes("count the apples")), titles.join(" | "));
    assert.ok(titles.some((t) => t.includes("count the pears (explore)")), titles.join(" | "));
    await shot("run-timeline-sub-agents");
  });

  await step("a correction's timeline marks the rejection", async () => {
    const runs = await call("GET", "/api/v1/runs?limit=50");
    // The run of "write the story": its conversation's run with a rejection.
    let found = null;
    for (const r of runs.json.data) {
      const steps = await call("GET", `/api/v1/runs/${r.run_id}/steps`);
      if (steps.json.data.some((s) => s.status === "rejected")) {
        found = r.run_id;
        break;
      }
    }
    assert.ok(found, "a run with a rejected step");
    await page.goto(base + `/#/runs/${found}`);
    await page.waitForSelector('.run-detail[data-complete="true"]', { timeout: 30000 });
    assert.ok((await page.locator(".timeline rect.mark.correction").count()) >= 1);
    assert.ok((await page.locator(".timeline rect.mark.rejected").count()) >= 1);
  });

  await step("a pending approval is approved from the inbox and the tool runs once", async () => {
    const started = await call("POST", "/api/v1/runs", { agent: "gatekeeper", message: "save the release note" });
    assert.equal(started.status, 202, started.text);
    const runId = started.json.run_id;
    const pending = await until(async () => (await call("GET", "/api/v1/approvals")).json.data.find((a) => a.run_id === runId), 30000, "the approval pending");
    await page.goto(base + "/#/approvals");
    const card = page.locator(`#approvals article[data-approval="${pending.id}"]`);
    await card.waitFor();
    assert.match(await card.textContent(), /write/);
    assert.match(await card.locator("pre").textContent(), /release-note\.txt/);
    await until(async () => /Asked: .save the release note/.test(await card.textContent()), 10000, "the run's message shown");
    await shot("approvals");
    await card.getByRole("button", { name: "Approve" }).click();
    await card.locator(".ok-note").waitFor();
    const run = await until(async () => {
      const r = await call("GET", `/api/v1/runs/${runId}`);
      return r.json.status !== "running" && r.json.status !== "queued" ? r.json : null;
    }, 30000, "the run's end");
    assert.equal(run.status, "succeeded");
    const steps = (await call("GET", `/api/v1/runs/${runId}/steps`)).json.data;
    assert.equal(steps.filter((st) => st.kind === "tool" && st.name === "write").length, 1, JSON.stringify(steps.map((st) => [st.kind, st.name])));
    // Decided: a second decision is refused with 409, and the inbox no longer lists it.
    assert.equal((await call("POST", `/api/v1/approvals/${pending.id}`, { decision: "deny" })).status, 409);
    assert.equal((await call("GET", "/api/v1/approvals")).json.data.some((a) => a.id === pending.id), false);
  });

  // 1,000 conversations for the first-paint step, seeded through the API (each with a run
  // of the scripted model) while the overview watches.
  const seed = async () => {
    const have = (await call("GET", "/api/v1/conversations?limit=1")).json.total;
    const want = 1000 - have;
    let next = 0;
    const worker = async () => {
      while (next < want) {
        const n = next++;
        const r = await call("POST", "/api/v1/runs", { agent: "analyst", message: `seed conversation ${n}` });
        assert.equal(r.status, 202, r.text);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    await until(async () => (await call("GET", "/api/v1/runs?status=active&limit=1")).json.total === 0, 120000, "the seeded runs to end");
  };

  await step("the overview charts live runs, runs/s, latency and streams from /metrics", async () => {
    await page.goto(base + "/#/overview");
    await page.waitForSelector("#live-runs-value");
    const seeding = seed();
    // While 1,000 runs go through: a rate above zero, latency from the last 30 s.
    await until(async () => Number(await page.textContent("#runs-rate-value")) > 0, 60000, "runs/s above 0");
    await seeding;
    await until(async () => (await page.getAttribute("#live-runs svg polyline", "points"))?.split(" ").length >= 6, 30000, "six samples");
    assert.match(await page.textContent("#run-latency-value"), /\d+(\.\d+)? (ms|s)/);
    assert.match(await page.textContent("#run-latency .hint"), /last 30 s/);
    await shot("overview");
    const metrics = await call("GET", "/metrics");
    assert.match(metrics.text, /troupe_runs_finished_total\{status="succeeded"\} [1-9]/);
    assert.match(metrics.text, /troupe_runs_finished_total\{status="cancelled"\} [1-9]/);
    assert.match(metrics.text, /troupe_runs_active 0/);
    assert.match(metrics.text, /troupe_run_duration_seconds_count [1-9]/);
  });

  await step("a memory candidate is approved", async () => {
    const created = await call("POST", "/api/v1/memories", { key: "editor", kind: "preference", content: "prefers vim", status: "candidate" });
    assert.equal(created.status, 201, created.text);
    const id = created.json.memory.id;
    await page.goto(base + "/#/memory");
    const card = page.locator(`#candidates article[data-memory="${id}"]`);
    await card.waitFor();
    await shot("memory");
    await card.getByRole("button", { name: "Approve" }).click();
    await until(async () => (await call("GET", `/api/v1/memories/${id}`)).json.status === "active", 10000, "the memory active");
    const approved = page.locator(`#memories article[data-memory="${id}"]`);
    await approved.locator(".badge.active").waitFor();
    // Edited in place; its revisions show the approval and the edit, by whom.
    await approved.getByRole("button", { name: "Edit" }).click();
    await approved.locator("textarea").fill("prefers vim, with the default keys");
    await approved.getByRole("button", { name: "Save" }).click();
    await until(async () => (await call("GET", `/api/v1/memories/${id}`)).json.content === "prefers vim, with the default keys", 10000, "the edit stored");
    const edited = page.locator(`#memories article[data-memory="${id}"]`);
    await edited.locator("summary").click();
    await edited.locator(".history table").first().waitFor();
    const revisions = await edited.locator(".history table").first().textContent();
    assert.match(revisions, /approved/);
    assert.match(revisions, /updated/);
    assert.match(revisions, /admin:1|user:1/);
    await shot("memory-revisions");
  });

  await step("settings forms show the API's errors; every settings page renders", async () => {
    await page.goto(base + "/#/settings/providers");
    const newForm = page.locator("#provider-new");
    await newForm.waitFor();
    await newForm.locator('input[name="name"]').fill("sneaky");
    await newForm.locator('input[name="api_key_ref"]').fill("HOME");
    await newForm.locator('button[type="submit"]').click();
    await newForm.locator(".alert").waitFor();
    assert.match(await newForm.locator(".alert").textContent(), /api_key_ref: 'HOME' is not allowed/);
    await shot("settings-providers");
    for (const tab of ["agents", "tools", "mcp", "skills", "channels", "users"]) {
      await page.goto(base + `/#/settings/${tab}`);
      await page.waitForSelector(`#settings-${tab} table, #settings-${tab} .alert`, { timeout: 15000 });
      await shot(`settings-${tab}`);
    }
    // The skills page lists the skill that loaded (its body on Read) and the broken one's problem.
    await page.goto(base + "/#/settings/skills");
    const greet = page.locator('#settings-skills tr[data-skill="greet"]');
    await greet.waitFor();
    assert.match(await greet.textContent(), /available/);
    assert.match(await page.textContent("#settings-skills tr.problem"), /broken\/SKILL\.md/);
    await greet.getByRole("button", { name: "Read" }).click();
    await page.locator("#skill-detail pre").waitFor();
    assert.match(await page.textContent("#skill-detail pre"), /Say hello in the user's language/);
    await shot("settings-skills");
    // A token made here is shown once.
    await page.goto(base + "/#/settings/users");
    const tokenForm = page.locator("#token-new");
    await tokenForm.locator('input[name="name"]').fill("laptop");
    await tokenForm.locator('button[type="submit"]').click();
    await page.waitForSelector("#new-token");
    assert.match(await page.textContent("#new-token"), /^trp_[0-9a-f]{64}$/);
  });

  await step("the console has no horizontal overflow at 375 px and follows the dark theme", async () => {
    const phone = await browser.newContext({ viewport: { width: 375, height: 740 }, colorScheme: "dark" });
    await phone.addInitScript((t) => sessionStorage.setItem("troupe.token", t), token);
    const p = await phone.newPage();
    const old = page;
    page = p;
    try {
      for (const [hash, name] of [["#/chat", "mobile-conversations"], [`#/chat/${(await call("GET", "/api/v1/conversations?limit=1")).json.data[0].id}`, "mobile-chat"], [`#/runs/${chartRun}`, "mobile-timeline"], ["#/overview", null], ["#/memory", null], ["#/settings/agents", null]]) {
        await p.goto(base + "/" + hash);
        await p.waitForSelector("main#main > *");
        await p.waitForLoadState("networkidle").catch(() => {});
        const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `${hash} overflows by ${overflow} px at 375 px`);
        if (name) await p.screenshot({ path: join(shotDir, `${name}.png`) });
      }
      const bg = await p.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const [r, g, b] = bg.match(/\d+/g).map(Number);
      assert.ok(r + g + b < 150, `dark background (${bg})`);
    } finally {
      page = old;
      await phone.close();
    }
  });

  await step("sign out forgets the token", async () => {
    await page.goto(base + "/#/chat");
    await page.click("#sign-out");
    await page.waitForSelector("#token");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("troupe.token")), null);
  });

  await step("first paint within 1 s with 1,000 conversations", async () => {
    assert.equal((await call("GET", "/api/v1/conversations?limit=1")).json.total, 1000);
    const fresh = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await fresh.addInitScript((t) => sessionStorage.setItem("troupe.token", t), token);
    const p = await fresh.newPage();
    const old = page;
    page = p;
    try {
      // Warm the browser process (not the page: a new navigation measures from its start).
      await p.goto("about:blank");
      await p.goto(base + "/#/chat");
      await p.waitForSelector(".conversations li a");
      const timing = await p.evaluate(() => {
        const fcp = performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null;
        const fp = performance.getEntriesByName("first-paint")[0]?.startTime ?? null;
        const listed = performance.getEntriesByName("console:conversations-listed")[0]?.startTime ?? null;
        return { fp, fcp, listed, count: document.querySelectorAll(".conversations li").length, total: document.querySelector(".conversations .count").textContent };
      });
      console.log(`     first paint ${timing.fp?.toFixed(0)} ms, first contentful paint ${timing.fcp?.toFixed(0)} ms, the list of ${timing.total} shown at ${timing.listed?.toFixed(0)} ms (${timing.count} rows)`);
      writeFileSync(join(outDir, "first-paint.json"), JSON.stringify(timing, null, 2));
      assert.ok(timing.fcp !== null && timing.fcp <= 1000, `first contentful paint ${timing.fcp} ms`);
      assert.ok(timing.listed !== null && timing.listed <= 1000, `conversations listed at ${timing.listed} ms`);
      assert.match(timing.total, /^1000 conversations/);
      await p.screenshot({ path: join(shotDir, "chat-1000-conversations.png") });
      // Session search finds one of them by a word of its message.
      await p.fill("#conversation-search", "conversation 737");
      await until(async () => (await p.textContent(".conversations .count")).includes("match"), 10000, "search results");
      assert.match(await p.textContent(".conversations li:first-child .snippet"), /737/);
      await p.screenshot({ path: join(shotDir, "chat-search.png") });
    } finally {
      page = old;
      await fresh.close();
    }
  });

  await step("no Content-Security-Policy violation happened", async () => {
    assert.deepEqual(cspViolations, []);
  });
} catch (e) {
  failed = true;
  console.error("FAILED:", e);
} finally {
  await browser?.close().catch(() => {});
}

const clean = await stopAll();
if (!clean) {
  failed = true;
  console.error("FAILED: a troupe process did not exit 0 on SIGTERM");
}
for (const o of outputs) {
  if (/Sanitizer|runtime error/.test(o.text)) {
    failed = true;
    console.error(`FAILED: ${o.name} reported:\n${o.text}`);
  }
}
rmSync(work, { recursive: true, force: true });
const bad = results.filter((r) => !r.ok);
console.log(`${results.length - bad.length} of ${results.length} steps passed`);
process.exit(failed || bad.length ? 1 : 0);
