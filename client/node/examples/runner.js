// @ts-check
// An agent runner in miniature: every tool goes through guardTool, so a loop gets a warning,
// then a blocked tool result instead of another identical call.
//
//   loopwarden serve --config daemon.json5   # with tools.loopDetection.enabled: true
//   LOOPWARDEN_TARGET=127.0.0.1:50051 node examples/runner.js
import { LoopwardenClient, RunAborted, guardTool } from '../src/index.js';

const client = new LoopwardenClient(process.env.LOOPWARDEN_TARGET ?? '127.0.0.1:50051', { agentId: 'example' });
const runId = `example-${process.pid}-${Date.now()}`;

// A tool the "model" keeps calling with the same arguments, always getting the same answer.
const readFile = guardTool(client, runId, 'read',
  async (/** @type {{path: string}} */ { path }) => ({ content: [{ type: 'text', text: `contents of ${path}` }] }),
  { onWarning: (verdict) => console.log(`warning (${verdict.detector}, ${verdict.count}): ${verdict.message}`) });

try {
  for (let turn = 1; turn <= 40; turn++) {
    const result = /** @type {any} */ (await readFile({ path: '/etc/hosts' }));
    if (result.details?.status === 'blocked') {
      console.log(`turn ${turn}: blocked by ${result.details.detector} after ${result.details.count} repeats`);
      console.log(`the model sees: ${result.content[0].text}`);
      break;
    }
    console.log(`turn ${turn}: ran read`);
  }
} catch (err) {
  if (!(err instanceof RunAborted)) throw err;
  console.log(`run aborted: ${err.message}`);
} finally {
  await client.runEnd(runId);
  client.close();
}
