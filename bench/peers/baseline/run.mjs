// Reference point, not a peer: the same agent run written by hand in plain Node, with no
// framework and no npm packages — two Chat Completions requests with the global fetch (undici,
// which the openai SDK also uses on Node 20) and the same `read` tool work between them. The
// difference between a peer and this baseline is what the framework adds on top of Node, HTTP and
// the mock. See ../README.md.
//
//   node --expose-gc run.mjs --base-url http://127.0.0.1:PORT/v1 --concurrency 100 --runs 2000

import { INSTRUCTIONS, READ_DESCRIPTION, TASK, main, readTool } from '../lib/harness.mjs';

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: READ_DESCRIPTION,
      parameters: {
        type: 'object',
        properties: { file_path: { type: 'string' } },
        required: ['file_path'],
        additionalProperties: false,
      },
    },
  },
];

async function setup(options) {
  const url = `${options.baseUrl}/chat/completions`;
  const complete = async (messages) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer mock-llm-needs-no-key' },
      body: JSON.stringify({ model: 'mock-llm', messages, tools: TOOLS }),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const body = await res.json();
    return body.choices[0].message;
  };

  let invocations = 0;
  return {
    toolInvocations: () => invocations,
    async runOnce() {
      const messages = [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: TASK },
      ];
      let toolCalls = 0;
      for (let turn = 0; turn < 4; ++turn) {
        const message = await complete(messages);
        messages.push(message);
        if (!message.tool_calls?.length) return { text: message.content, toolCalls };
        for (const call of message.tool_calls) {
          if (call.function.name !== 'read') throw new Error(`unknown tool ${call.function.name}`);
          const { file_path } = JSON.parse(call.function.arguments);
          const content = await readTool(options.workspace, file_path);
          ++invocations;
          ++toolCalls;
          messages.push({ role: 'tool', tool_call_id: call.id, content });
        }
      }
      throw new Error('no final answer after 4 turns');
    },
  };
}

process.exitCode = await main({ name: 'node-baseline', versions: {}, setup });
