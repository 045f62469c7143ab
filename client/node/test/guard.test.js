// @ts-check
// guardTool, inspect and the failure modes against the real daemon: the semantics of the
// Python ToolGuard (client/python/loopwarden/runner.py).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import {
  LoopwardenClient, LoopwardenUnavailable, RunAborted, RunNotFound, guardTool, mayRun,
} from '../src/index.js';
import { startDaemon } from './support/daemon.js';

/** @type {import('./support/daemon.js').Daemon} */
let daemon;
/** @type {LoopwardenClient} */
let client;

before(async () => {
  daemon = await startDaemon({ tools: { loopDetection: { enabled: true } } });
  client = new LoopwardenClient(daemon.grpcTarget);
});

after(async () => {
  client?.close();
  await daemon?.stop();
});

const SAME = { content: [{ type: 'text', text: 'same' }], details: { ok: true } };

describe('guardTool', () => {
  test('warns on repeats, then blocks the 21st identical call without running the tool', async () => {
    let runs = 0;
    /** @type {import('../src/index.js').Verdict[]} */
    const warnings = [];
    const read = guardTool(client, 'guard/block', 'read', async () => { runs += 1; return SAME; },
      { onWarning: (v) => warnings.push(v) });
    /** @type {any[]} */
    const results = [];
    for (let i = 0; i < 21; i++) results.push(await read({ path: '/x' }));
    assert.equal(runs, 20);
    assert.deepStrictEqual(results[19], SAME);
    assert.ok(warnings.some((v) => v.detector === 'generic_repeat' && v.level === 'warning'));
    const blocked = results[20];
    assert.deepStrictEqual(blocked.details, { status: 'blocked', deniedReason: 'tool-loop', detector: 'generic_repeat', count: 20 });
    assert.equal(blocked.content[0].type, 'text');
    assert.ok(blocked.content[0].text.length > 0);
    const inspection = await client.inspect('guard/block');
    assert.equal(inspection.blocks, 1);
    // The blocked result was reported as the 21st outcome.
    assert.notEqual(inspection.records.at(-1)?.resultHash ?? '', '');
  });

  test('reports a thrown error as the outcome and rethrows it', async () => {
    const failing = guardTool(client, 'guard/error', 'exec', async () => { throw new TypeError('boom'); });
    await assert.rejects(failing({ command: 'false' }), TypeError);
    const inspection = await client.inspect('guard/error');
    assert.equal(inspection.records.length, 1);
    assert.notEqual(inspection.records[0].resultHash, '');
  });

  test('throws RunAborted when the post-compaction guard aborts, and runs nothing after', async () => {
    let runs = 0;
    const gateway = guardTool(client, 'guard/abort', 'gateway', async () => { runs += 1; return { content: [] }; });
    await client.compactionRetry('guard/abort');
    await gateway({ action: 'lookup' });
    await gateway({ action: 'lookup' });
    await assert.rejects(gateway({ action: 'lookup' }), (err) => err instanceof RunAborted
      && err.verdict.errorCode === 'compaction_loop_persisted');
    assert.equal(runs, 3);
    await assert.rejects(gateway({ action: 'lookup' }), RunAborted);
    assert.equal(runs, 3);
    assert.equal((await client.inspect('guard/abort')).aborted, true);
  });

  test('fails open by default when the daemon is unreachable', async () => {
    const offline = new LoopwardenClient('127.0.0.1:1');
    try {
      const read = guardTool(offline, 'guard/offline', 'read', async () => 'ran');
      assert.equal(await read({}), 'ran');
      const strict = guardTool(offline, 'guard/offline', 'read', async () => 'ran', { failOpen: false });
      await assert.rejects(strict({}), LoopwardenUnavailable);
    } finally {
      offline.close();
    }
  });
});

describe('client', () => {
  test('numbers events from 1 and echoes the run id', async () => {
    const fresh = new LoopwardenClient(daemon.grpcTarget, { agentId: 'a1' });
    try {
      const first = await fresh.toolCall('client/seq', 'read', { path: '/a' });
      const second = await fresh.toolOutcome('client/seq', 'read', { path: '/a' }, { result: 'x' });
      assert.deepStrictEqual([first.seq, second.seq], [1, 2]);
      assert.equal(first.runId, 'client/seq');
      assert.ok(mayRun(first));
      assert.equal((await fresh.inspect('client/seq')).agentId, 'a1');
      assert.equal((await fresh.runEnd('client/seq')).action, 'allow');
    } finally {
      fresh.close();
    }
  });

  test('overlapping calls on one stream each get their own verdict', async () => {
    const verdicts = await Promise.all(Array.from({ length: 10 }, (_, i) => client.toolCall('client/overlap', 'read', { n: i }, { seq: 100 + i })));
    assert.deepStrictEqual(verdicts.map((v) => v.seq), Array.from({ length: 10 }, (_, i) => 100 + i));
  });

  test('sends the bearer token a protected daemon asks for', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loopwarden-token-'));
    fs.writeFileSync(path.join(dir, 'token'), 's3cret\n');
    const guarded = await startDaemon({}, ['--auth-token-file', path.join(dir, 'token')]);
    const withToken = new LoopwardenClient(guarded.grpcTarget, { token: 's3cret' });
    const without = new LoopwardenClient(guarded.grpcTarget);
    try {
      assert.equal((await withToken.toolCall('client/token', 'read', {})).action, 'allow');
      await assert.rejects(without.toolCall('client/token', 'read', {}), /UNAUTHENTICATED/);
    } finally {
      withToken.close();
      without.close();
      await guarded.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('inspect of an unknown run throws RunNotFound', async () => {
    await assert.rejects(client.inspect('client/never-seen'), RunNotFound);
  });

  test('a malformed event is rejected alone', async () => {
    const verdict = await client.toolCall('client/reject', 'read', undefined, { paramsJson: '{not json' });
    assert.deepStrictEqual([verdict.action, verdict.errorCode], ['reject', 'invalid_params_json']);
  });
});

test('the example runner gets blocked by a daemon with detection enabled', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [new URL('../examples/runner.js', import.meta.url).pathname],
    { env: { ...process.env, LOOPWARDEN_TARGET: daemon.grpcTarget }, timeout: 30_000 });
  assert.match(stdout, /turn 21: blocked by generic_repeat after 20 repeats/);
  assert.match(stdout, /warning \(generic_repeat, 10\)/);
});
