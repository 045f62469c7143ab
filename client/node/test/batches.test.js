// @ts-check
// `batchId` and `toolClass` against the real daemon under `loopwarden: {preset: "fast"}` (parallel
// batches and the duplicate side-effect guard on): the fields reach the engine.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { LoopwardenClient, mayRun, toolCallEvent } from '../src/index.js';
import { startDaemon } from './support/daemon.js';

/** @type {import('./support/daemon.js').Daemon} */
let daemon;
/** @type {LoopwardenClient} */
let client;

before(async () => {
  daemon = await startDaemon({ loopwarden: { preset: 'fast' } });
  client = new LoopwardenClient(daemon.grpcTarget);
});

after(async () => {
  client?.close();
  await daemon?.stop();
});

describe('batchId', () => {
  test("groups one turn's calls: identical calls of a turn count once", async () => {
    const params = { path: 'a' };
    // Three turns of three identical reads, each reported with its outcome (fast blocks at the
    // 3rd identical outcome, so nine calls one by one would be blocked).
    for (let turn = 0; turn < 3; turn++) {
      for (let i = 0; i < 3; i++) {
        const verdict = await client.toolCall('node/batches', 'read', params, { batchId: `turn-${turn}` });
        assert.ok(mayRun(verdict), `turn ${turn}: ${JSON.stringify(verdict)}`);
        await client.toolOutcome('node/batches', 'read', params, { result: 'same' });
      }
    }
    // Without batch ids the same reads are repeats: the 4th is blocked (fast: sameOutcome 3).
    const seen = [];
    for (let i = 0; i < 4; i++) {
      seen.push(await client.toolCall('node/no-batches', 'read', params));
      await client.toolOutcome('node/no-batches', 'read', params, { result: 'same' });
    }
    assert.equal(seen[3].action, 'block');
  });
});

describe('toolClass', () => {
  const email = { to: 'ops@example.com', body: 'deploy done' };
  /** @param {string} run @param {import('../src/index.js').EventOptions} [opts] */
  async function send(run, opts = {}) {
    const verdict = await client.toolCall(run, 'send_email', email, opts);
    if (mayRun(verdict)) await client.toolOutcome(run, 'send_email', email, { result: 'sent' });
    return verdict;
  }

  test('a mutating tool reaches the duplicate side-effect guard', async () => {
    const first = await send('node/mutating', { toolClass: 'mutating' });
    const second = await send('node/mutating', { toolClass: 'mutating' });
    assert.ok(mayRun(first));
    assert.deepStrictEqual([second.action, second.detector], ['block', 'duplicate_side_effect']);
    const plain = [await send('node/unclassed'), await send('node/unclassed')];
    assert.ok(plain.every(mayRun), 'a tool of no class is not judged as a side effect');
  });

  test('an unknown class is a TypeError that names the classes', async () => {
    // @ts-expect-error: not a class
    assert.throws(() => toolCallEvent('r', 'read', {}, { toolClass: 'readonly' }), /'readOnly', 'mutating', 'poll'.*"readonly"/);
    // @ts-expect-error: not a class
    await assert.rejects(client.toolCall('node/bad-class', 'read', {}, { toolClass: 'write' }), TypeError);
    for (const toolClass of /** @type {const} */ (['', 'readOnly', 'mutating', 'poll'])) {
      assert.ok(toolCallEvent('r', 'read', {}, { toolClass }).toolCall.toolClass.startsWith('TOOL_CLASS_'));
    }
  });
});
