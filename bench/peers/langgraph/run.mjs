// The `agent` scenario on LangGraph.js: the prebuilt ReAct agent (createReactAgent: a graph of
// an LLM node and a ToolNode) with a `read` tool and ChatOpenAI pointed at troupe's mock-llm over
// the Chat Completions wire. See ../README.md.
//
//   node --expose-gc run.mjs --base-url http://127.0.0.1:PORT/v1 --concurrency 100 --runs 2000 \
//       --json ../results/langgraph-c100.json

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { INSTRUCTIONS, READ_DESCRIPTION, TASK, main, packageVersions, readTool } from '../lib/harness.mjs';

// LangSmith tracing is off unless these are set; make sure a caller's environment cannot turn it
// on (it would post every run to api.smith.langchain.com).
for (const k of ['LANGCHAIN_TRACING_V2', 'LANGCHAIN_TRACING', 'LANGSMITH_TRACING', 'LANGSMITH_TRACING_V2']) {
  delete process.env[k];
}

async function setup(options) {
  const llm = new ChatOpenAI({
    model: 'mock-llm',
    apiKey: 'mock-llm-needs-no-key',
    configuration: { baseURL: options.baseUrl },
    useResponsesApi: false, // Chat Completions, as mock-llm and troupe's provider client speak
    streaming: false,
    maxRetries: 0, // a failed call must count as an error, not be retried out of sight
    timeout: options.timeoutMs,
  });

  let invocations = 0;
  const read = tool(
    async ({ file_path }, config) => {
      const out = await readTool(options.workspace, file_path);
      ++invocations;
      config.configurable.bench.toolCalls += 1;
      return out;
    },
    {
      name: 'read',
      description: READ_DESCRIPTION,
      schema: z.object({ file_path: z.string() }),
    },
  );
  const agent = createReactAgent({ llm, tools: [read], prompt: INSTRUCTIONS });

  return {
    toolInvocations: () => invocations,
    async runOnce() {
      const bench = { toolCalls: 0 };
      const state = await agent.invoke(
        { messages: [{ role: 'user', content: TASK }] },
        { configurable: { bench }, recursionLimit: 8 },
      );
      const last = state.messages[state.messages.length - 1];
      const text = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content);
      return { text, toolCalls: bench.toolCalls };
    },
  };
}

process.exitCode = await main({
  name: 'langgraph',
  versions: packageVersions(path.dirname(fileURLToPath(import.meta.url)), [
    '@langchain/langgraph',
    '@langchain/core',
    '@langchain/openai',
    'openai',
    'zod',
  ]),
  setup,
});
