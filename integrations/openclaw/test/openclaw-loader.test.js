// @ts-check
// The plugin loaded by OpenClaw's own plugin loader and driven through OpenClaw's own tool-hook
// dispatch (no model), against a real daemon.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LoopwardenClient, RunNotFound } from '@loopwarden/client';
import { DETECTION_ON, metricValue, startDaemon } from './support/daemon.js';
import { eventually, loadWithOpenClaw } from './support/openclaw-host.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */
/** @typedef {import('./support/openclaw-host.js').OpenClawHost} OpenClawHost */

const same = () => ({ content: [{ type: 'text', text: 'line 1\nline 2' }], details: { path: 'notes.txt' } });

describe('loaded by OpenClaw\'s plugin loader', () => {
  /** @type {Daemon} */
  let daemon;
  /** @type {OpenClawHost} */
  let openclaw;
  before(async () => {
    daemon = await startDaemon(DETECTION_ON);
    openclaw = await loadWithOpenClaw({ target: daemon.grpcTarget });
  });
  after(async () => {
    await openclaw?.hookRunner?.runGatewayStop?.({ reason: 'test' }, {});
    await daemon?.stop();
  });

  test('OpenClaw loads the plugin and registers its five hooks and its tool-result middleware', () => {
    const record = openclaw.registry.plugins.find((/** @type {any} */ p) => p.id === 'loopwarden');
    assert.equal('loaded', record?.status, JSON.stringify(record?.error ?? openclaw.registry.diagnostics));
    const hooks = openclaw.registry.typedHooks.filter((/** @type {any} */ h) => h.pluginId === 'loopwarden').map((/** @type {any} */ h) => h.hookName);
    assert.deepEqual(['before_tool_call', 'after_tool_call', 'after_compaction', 'session_end', 'subagent_spawned', 'gateway_stop'], hooks);
    const middlewares = openclaw.registry.agentToolResultMiddlewares.filter((/** @type {any} */ m) => m.pluginId === 'loopwarden');
    assert.equal(1, middlewares.length, JSON.stringify(openclaw.registry.diagnostics));
    assert.deepEqual([], openclaw.registry.diagnostics.filter((/** @type {any} */ d) => d.pluginId === 'loopwarden' && d.level === 'error'));
  });

  test('21 identical calls: OpenClaw runs 20, and hands the model its blocked result with the block message for the 21st', async () => {
    const scope = { runId: 'oc-run-1', sessionId: 'oc-session-1', sessionKey: 'agent:coder:oc1', agentId: 'coder' };
    const blocksBefore = await metricValue(daemon.metricsAddress, 'loopwarden_blocks_total', { detector: 'generic_repeat', agent: 'coder' });
    const labelled = { action: 'block', detector: 'generic_repeat', agent: 'coder' };
    const ownBefore = await metricValue(daemon.metricsAddress, 'loopwarden_verdicts_total', { ...labelled, integration: 'openclaw' });
    const grpcBefore = await metricValue(daemon.metricsAddress, 'loopwarden_verdicts_total', { ...labelled, integration: 'grpc' });
    let ran = 0;
    const results = [];
    for (let i = 1; i <= 21; i++) results.push(await openclaw.callTool(scope, 'read', { path: 'notes.txt' }, () => { ran += 1; return same(); }));
    assert.equal(20, ran);
    const blocked = results[20];
    assert.equal('blocked', blocked.details?.status);
    assert.equal('plugin-before-tool-call', blocked.details?.deniedReason);
    assert.match(blocked.content[0].text, /read.*identical/i);
    assert.deepEqual([11], results.map((r, i) => [i + 1, r.content.length]).filter(([, n]) => n > 1).map(([i]) => i),
      'the announced warning is appended by the middleware to the 11th result');
    assert.match(results[10].content.at(-1).text, /identical arguments/i);
    const blocksAfter = await metricValue(daemon.metricsAddress, 'loopwarden_blocks_total', { detector: 'generic_repeat', agent: 'coder' });
    assert.equal(blocksBefore + 1, blocksAfter);
    // The plugin names itself: the block is the openclaw integration's, not plain gRPC's.
    assert.equal(ownBefore + 1, await metricValue(daemon.metricsAddress, 'loopwarden_verdicts_total', { ...labelled, integration: 'openclaw' }));
    assert.equal(grpcBefore, await metricValue(daemon.metricsAddress, 'loopwarden_verdicts_total', { ...labelled, integration: 'grpc' }));
  });

  test('after_compaction arms the guard; the persisting loop is aborted and the plugin asks OpenClaw to end the run', async () => {
    const scope = { runId: 'oc-run-2', sessionId: 'oc-session-2', sessionKey: 'agent:coder:oc2', agentId: 'coder' };
    await openclaw.harness.runAgentHarnessAfterCompactionHook({ sessionFile: '/tmp/oc-session-2.jsonl', ctx: { ...scope }, compactedCount: 12 });
    assert.ok(openclaw.logs.some((l) => /post-compaction guard armed/.test(l.message)), JSON.stringify(openclaw.logs));
    for (let i = 1; i <= 3; i++) await openclaw.callTool(scope, 'exec', { command: 'make' }, same);
    // OpenClaw's abortAgentHarnessRun, imported by the plugin inside OpenClaw: no embedded run is
    // active in this test process, so it answers false and the plugin says so.
    assert.ok(await eventually(() => openclaw.logs.some((l) => /OpenClaw had no active run for session oc-session-2/.test(l.message))),
      JSON.stringify(openclaw.logs));
    let ran = false;
    const next = await openclaw.callTool(scope, 'read', { path: 'x' }, () => { ran = true; return same(); });
    assert.equal(false, ran);
    assert.equal('blocked', next.details?.status);
    assert.match(next.content[0].text, /compaction/);
  });

  test('session_end frees the session\'s runs on the daemon', async () => {
    const scope = { runId: 'oc-run-3', sessionId: 'oc-session-3', sessionKey: 'agent:coder:oc3', agentId: 'coder' };
    await openclaw.callTool(scope, 'read', { path: 'notes.txt' }, same);
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    try {
      assert.equal(1, (await inspector.inspect(scope.sessionId)).records.length, 'the session is the loopwarden run');
      await openclaw.hookRunner.runSessionEnd({ sessionId: scope.sessionId, sessionKey: scope.sessionKey, messageCount: 3, reason: 'reset' },
        { sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: 'coder' });
      await assert.rejects(inspector.inspect(scope.sessionId), RunNotFound);
    } finally {
      inspector.close();
    }
  });
});
