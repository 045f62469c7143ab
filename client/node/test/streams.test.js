// @ts-check
// The per_run stream mode against the real daemon: one routed stream per run, reopened
// transparently after the daemon closed it for idleness; Check and InspectRun carry the header.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { LoopwardenClient } from '../src/index.js';
import { startDaemon } from './support/daemon.js';

/** @type {import('./support/daemon.js').Daemon} */
let daemon;

before(async () => {
  daemon = await startDaemon({ tools: { loopDetection: { enabled: true } } }, ['--stream-idle-timeout', '0.3']);
});

after(async () => {
  await daemon?.stop();
});

describe('per_run streams', () => {
  test('a stream closed for idleness is reopened on the next event; counts go on', async () => {
    const client = new LoopwardenClient(daemon.grpcTarget, { streams: 'per_run' });
    try {
      for (let i = 0; i < 5; i++) await client.toolCall('node-idle', 'read', { p: 1 });
      await sleep(1000); // past the daemon's 0.3 s --stream-idle-timeout: it closes the stream
      const verdicts = [];
      for (let i = 0; i < 6; i++) verdicts.push(await client.toolCall('node-idle', 'read', { p: 1 }));
      assert.deepEqual(verdicts.map((v) => v.action), ['allow', 'allow', 'allow', 'allow', 'allow', 'warn']);
    } finally {
      client.close();
    }
  });

  test('a batch of two runs goes on two streams, answered in event order; run_end closes a stream', async () => {
    const client = new LoopwardenClient(daemon.grpcTarget, { streams: 'per_run' });
    try {
      const events = [0, 1, 2, 3].map((i) => ({ runId: `node-batch-${i % 2}`, seq: i + 1, toolCall: { toolName: 'read' } }));
      const verdicts = await client.evaluate(events);
      assert.deepEqual(verdicts.map((v) => v.action), ['allow', 'allow', 'allow', 'allow']);
      assert.equal(/** @type {any} */ (client).runStreams.size, 2);
      assert.equal((await client.inspect('node-batch-0')).eventsEvaluated, 2);
      await client.runEnd('node-batch-0');
      assert.equal(/** @type {any} */ (client).runStreams.size, 1);
    } finally {
      client.close();
    }
  });

  test('an unknown mode is refused', () => {
    assert.throws(() => new LoopwardenClient(daemon.grpcTarget, /** @type {any} */ ({ streams: 'per-run' })), TypeError);
  });
});
