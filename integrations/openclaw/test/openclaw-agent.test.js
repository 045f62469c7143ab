// @ts-check
// The whole path a user runs: `openclaw agent --local` (OpenClaw's CLI, its embedded runner, its
// plugin loader loading this directory from plugins.load.paths) with a scripted model behind an
// OpenAI-compatible endpoint, against a real daemon. The model asks for the same `read` 12 times;
// what it is shown as tool results is checked from the requests it received.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { LoopwardenClient } from '@loopwarden/client';
import { DETECTION_ON, startDaemon } from './support/daemon.js';
import { startFakeModel } from './support/fake-model.js';
import { AGENT_TIMEOUT_MS, openclaw, openclawHome } from './support/openclaw-cli.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */
/** @typedef {import('./support/fake-model.js').FakeModel} FakeModel */

describe('openclaw agent --local with a scripted model', () => {
  /** @type {Daemon} */
  let daemon;
  /** @type {FakeModel} */
  let model;
  /** @type {string} */
  let home;
  before(async () => {
    daemon = await startDaemon(DETECTION_ON);
    model = await startFakeModel({ tool: 'read', args: { path: 'notes.txt' }, calls: 12 });
    home = openclawHome(model.baseUrl, daemon.grpcTarget);
  });
  after(async () => {
    await model?.close();
    await daemon?.stop();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  test('the 11th identical tool result the model receives carries the warning text', { timeout: AGENT_TIMEOUT_MS + 30_000 }, async () => {
    const run = await openclaw(home, ['agent', '--local', '--session-id', 'lw-agent-1', '--message', 'Read notes.txt until it changes.', '--json']);
    const results = model.toolResults();
    const shown = JSON.stringify({ code: run.code, results, stderr: run.stderr.slice(-4000) }, null, 2);
    assert.equal(0, run.code, shown);
    assert.equal(12, results.length, shown);
    assert.match(results[0], /line 1/, shown);
    const warned = results.map((text, i) => [i + 1, /identical arguments/i.test(text)]).filter(([, hit]) => hit).map(([n]) => n);
    assert.deepEqual([11], warned, shown);
  });
});

describe('openclaw agent --local, two messages in one session', () => {
  /** @type {Daemon} */
  let daemon;
  /** @type {FakeModel} */
  let model;
  /** @type {string} */
  let home;
  before(async () => {
    // OpenClaw's default agent is `main`: its own thresholds make the 5th identical call critical.
    daemon = await startDaemon({ ...DETECTION_ON, agents: { list: [...DETECTION_ON.agents.list,
      { id: 'main', tools: { loopDetection: { warningThreshold: 2, criticalThreshold: 4 } } }] } });
    model = await startFakeModel({ tool: 'read', args: { path: 'notes.txt' }, calls: 5, perTurn: true,
      stopWhen: (text) => /identical/i.test(text) && !/^WARNING/m.test(text) });
    home = openclawHome(model.baseUrl, daemon.grpcTarget);
  });
  after(async () => {
    await model?.close();
    await daemon?.stop();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  test('the second message is a user turn: the call blocked in the first message\'s run runs again', { timeout: 2 * AGENT_TIMEOUT_MS + 30_000 }, async () => {
    const args = ['agent', '--local', '--session-id', 'lw-turns', '--json'];
    const first = await openclaw(home, [...args, '--message', 'Read notes.txt until it changes.']);
    const firstResults = model.toolResults();
    const shown = (/** @type {any} */ run, /** @type {string[]} */ results) => JSON.stringify({ code: run.code, results, stderr: run.stderr.slice(-4000) }, null, 2);
    assert.equal(0, first.code, shown(first, firstResults));
    assert.equal(5, firstResults.length, shown(first, firstResults));
    assert.match(firstResults[4], /read.*identical/i, `the 5th read is blocked: ${shown(first, firstResults)}`);

    const second = await openclaw(home, [...args, '--message', 'The file changed now. Read notes.txt once more.']);
    const secondResults = model.toolResults();
    assert.equal(0, second.code, shown(second, secondResults));
    assert.ok(secondResults.length >= 1, shown(second, secondResults));
    assert.match(secondResults[0], /line 1/, `the new run\'s first read ran: ${shown(second, secondResults)}`);

    // One loopwarden run for the session (OpenClaw's session id), its history started over at the
    // second message: it holds only that run's calls.
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    try {
      const view = await inspector.inspect('lw-turns');
      const ranInSecond = secondResults.filter((text) => /^line 1/.test(text)).length;
      assert.equal(ranInSecond, view.records.length, JSON.stringify({ records: view.records.length, secondResults }));
    } finally {
      inspector.close();
    }
  });
});
