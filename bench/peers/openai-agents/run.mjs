// The `agent` scenario on the OpenAI Agents SDK for JS (@openai/agents): one Agent with a
// `read` function tool, run with `run(agent, TASK)` against troupe's mock-llm over the Chat
// Completions wire. See ../README.md.
//
//   node --expose-gc run.mjs --base-url http://127.0.0.1:PORT/v1 --concurrency 100 --runs 2000 \
//       --json ../results/openai-agents-c100.json

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { z } from 'zod';
import {
  Agent,
  OpenAIChatCompletionsModel,
  run,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import { INSTRUCTIONS, READ_DESCRIPTION, TASK, main, packageVersions, readTool } from '../lib/harness.mjs';

// Tracing would export spans to api.openai.com; there is nothing to export to here.
setTracingDisabled(true);

async function setup(options) {
  const client = new OpenAI({
    baseURL: options.baseUrl,
    apiKey: 'mock-llm-needs-no-key',
    maxRetries: 0, // a failed call must count as an error, not be retried out of sight
    timeout: options.timeoutMs,
  });
  // Chat Completions, not the SDK's default Responses API: mock-llm speaks Chat Completions,
  // as does troupe's provider client.
  const model = new OpenAIChatCompletionsModel(client, 'mock-llm');

  let invocations = 0;
  const read = tool({
    name: 'read',
    description: READ_DESCRIPTION,
    parameters: z.object({ file_path: z.string() }),
    errorFunction: null, // a failing tool fails the run instead of going back to the model
    execute: async ({ file_path }, runContext) => {
      const out = await readTool(options.workspace, file_path);
      ++invocations;
      runContext.context.toolCalls += 1;
      return out;
    },
  });
  const agent = new Agent({
    name: 'bench-agent',
    instructions: INSTRUCTIONS,
    model,
    tools: [read],
  });

  return {
    toolInvocations: () => invocations,
    async runOnce() {
      const context = { toolCalls: 0 };
      const result = await run(agent, TASK, { context, maxTurns: 4 });
      return { text: result.finalOutput, toolCalls: context.toolCalls };
    },
  };
}

process.exitCode = await main({
  name: 'openai-agents',
  versions: packageVersions(path.dirname(fileURLToPath(import.meta.url)), [
    '@openai/agents',
    'openai',
    'zod',
  ]),
  setup,
});
