// @ts-check
// With no daemon listening, through OpenClaw's own before_tool_call dispatch, which blocks a call
// whose hook throws or times out: the plugin must answer by its own policy instead.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { closedAddress } from './support/daemon.js';
import { loadWithOpenClaw } from './support/openclaw-host.js';

const scope = { runId: 'oc-down', sessionId: 'oc-down-session', sessionKey: 'agent:coder:down', agentId: 'coder' };
const ok = () => ({ content: [{ type: 'text', text: 'ok' }], details: {} });

describe('loaded by OpenClaw, no daemon listening', () => {
  test('fails open by default: OpenClaw runs every tool, and the plugin logs the outage once', async () => {
    const openclaw = await loadWithOpenClaw({ target: await closedAddress() });
    let ran = 0;
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await openclaw.callTool(scope, 'read', { path: 'a' }, () => { ran += 1; return ok(); }));
    await openclaw.harness.runAgentHarnessAfterCompactionHook({ sessionFile: '/tmp/down.jsonl', ctx: { ...scope }, compactedCount: 1 });
    await openclaw.hookRunner.runSessionEnd({ sessionId: scope.sessionId, messageCount: 1 }, { sessionId: scope.sessionId });
    assert.equal(3, ran);
    assert.deepEqual(['ok', 'ok', 'ok'], results.map((r) => r.content[0].text));
    const outage = openclaw.logs.filter((l) => /loopwarden: daemon unavailable/.test(l.message));
    assert.equal(1, outage.length, JSON.stringify(openclaw.logs));
    assert.deepEqual([], openclaw.logs.filter((l) => /hook failed/.test(l.message)), 'no hook ever threw');
    await openclaw.hookRunner.runGatewayStop?.({ reason: 'test' }, {});
  });

  test('fails closed when failOpen is false: OpenClaw hands the model the plugin\'s reason and runs nothing', async () => {
    const openclaw = await loadWithOpenClaw({ target: await closedAddress(), failOpen: false });
    let ran = 0;
    const result = await openclaw.callTool(scope, 'read', { path: 'a' }, () => { ran += 1; return ok(); });
    assert.equal(0, ran);
    assert.equal('blocked', result.details?.status);
    assert.match(result.content[0].text, /loopwarden\) is unavailable and is set to fail closed/);
    await openclaw.hookRunner.runGatewayStop?.({ reason: 'test' }, {});
  });
});
