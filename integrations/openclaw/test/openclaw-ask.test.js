// @ts-check
// ASK through OpenClaw's own plugin loader, before_tool_call dispatch and approval flow, against a
// real daemon with loopwarden.onCritical "ask": the plugin answers an ASK with requireApproval,
// OpenClaw asks a person (its embedded approval surface, answered by the test), and the person's
// allow-once / allow-always / deny, or their silence, reaches the daemon as an approval.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { DETECTION_ON, loopwardenCommand, metricValue, startDaemon } from './support/daemon.js';
import { embeddedApprovals, loadWithOpenClaw } from './support/openclaw-host.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */
/** @typedef {import('./support/openclaw-host.js').OpenClawHost} OpenClawHost */
/** @typedef {import('./support/openclaw-host.js').Scope} Scope */

const ASK_ON = Object.freeze({ ...DETECTION_ON, loopwarden: { onCritical: 'ask' } });
/** The least approvalTimeoutMs: OpenClaw holds an unanswered approval this long. */
const APPROVAL_TIMEOUT_MS = 1000;

const same = () => ({ content: [{ type: 'text', text: 'line 1\nline 2' }], details: {} });

/** @param {string} name @returns {Scope} */
const session = (name) => ({ runId: `oc-${name}-run`, sessionId: `oc-${name}-session`, sessionKey: `agent:coder:${name}`, agentId: 'coder' });

/**
 * `loopwarden exemptions list --json`: the daemon's own command line.
 * @param {string} address @returns {Promise<{ id: string, agent_id: string, tool_name: string, run_id: string }[]>}
 */
async function exemptionsList(address) {
  const [cmd, ...prefix] = loopwardenCommand();
  const { stdout } = await promisify(execFile)(cmd, [...prefix, 'exemptions', 'list', '--json', '--address', address]);
  return JSON.parse(stdout);
}

describe('ASK through OpenClaw\'s requireApproval', () => {
  /** @type {Daemon} */
  let daemon;
  /** @type {OpenClawHost} */
  let openclaw;
  /** @type {(string | null)[]} the person's answers, in order */
  const answers = [];
  /** @type {Awaited<ReturnType<typeof embeddedApprovals>>} */
  let surface;
  before(async () => {
    daemon = await startDaemon(ASK_ON);
    openclaw = await loadWithOpenClaw({ target: daemon.grpcTarget, approvalTimeoutMs: APPROVAL_TIMEOUT_MS });
    surface = await embeddedApprovals(answers);
  });
  after(async () => {
    surface?.stop();
    await openclaw?.hookRunner?.runGatewayStop?.({ reason: 'test' }, {});
    await daemon?.stop();
  });

  /**
   * 20 identical calls, then the 21st, which the daemon asks about.
   * @param {Scope} scope @param {Record<string, unknown>} params
   */
  async function loopUntilAsked(scope, params) {
    let ran = 0;
    const tool = () => { ran += 1; return same(); };
    for (let i = 1; i <= 20; i++) await openclaw.callTool(scope, 'read', params, tool);
    const asked = surface.requests.length;
    const result = await openclaw.callTool(scope, 'read', params, tool);
    return { result, requests: surface.requests.slice(asked), tool, runs: () => ran };
  }

  test('allow-always: OpenClaw asks, the call runs, and the answer is an exemption `loopwarden exemptions list` shows', async () => {
    const scope = session('always');
    const before = await metricValue(daemon.metricsAddress, 'loopwarden_approvals_total', { answer: 'approved_always', agent: 'coder' });
    answers.push('allow-always');
    const { result, requests, tool, runs } = await loopUntilAsked(scope, { path: 'always.txt' });
    assert.equal(1, requests.length, 'the 21st call was held for a person');
    const [request] = requests;
    assert.equal('loopwarden', request.request.pluginId);
    assert.equal('read', request.request.toolName);
    assert.equal('critical', request.request.severity);
    assert.match(request.request.description, /^CRITICAL: this call is held for a person/);
    assert.match(request.request.description, /identical/);
    assert.equal(APPROVAL_TIMEOUT_MS, request.expiresAtMs - request.createdAtMs);
    assert.equal(21, runs(), 'approved: OpenClaw ran the call');
    assert.notEqual('blocked', result.details?.status);

    const listed = await exemptionsList(daemon.grpcTarget);
    const mine = listed.filter((e) => e.run_id === scope.sessionId);
    assert.equal(1, mine.length, JSON.stringify(listed));
    assert.deepEqual(['coder', 'read'], [mine[0].agent_id, mine[0].tool_name]);
    assert.equal(before + 1, await metricValue(daemon.metricsAddress, 'loopwarden_approvals_total', { answer: 'approved_always', agent: 'coder' }));

    const asked = surface.requests.length;
    const again = await openclaw.callTool(scope, 'read', { path: 'always.txt' }, tool);
    assert.equal(22, runs(), 'the standing exemption lets the next identical call run');
    assert.notEqual('blocked', again.details?.status);
    assert.equal(asked, surface.requests.length, 'without asking again');
  });

  test('allow-once runs the call and the next critical asks again; deny blocks it, and the loop\'s later calls are blocked without asking', async () => {
    const scope = session('once');
    answers.push('allow-once', 'deny');
    const { result, tool, runs } = await loopUntilAsked(scope, { path: 'once.txt' });
    assert.equal(21, runs(), 'allowed once: the call ran');
    assert.notEqual('blocked', result.details?.status);
    const asked = surface.requests.length;
    const denied = await openclaw.callTool(scope, 'read', { path: 'once.txt' }, tool);
    assert.equal(asked + 1, surface.requests.length, 'the next critical of the loop was asked again');
    assert.equal(21, runs(), 'denied: not run');
    assert.match(denied.content[0].text, /Denied by user/);
    const blocked = await openclaw.callTool(scope, 'read', { path: 'once.txt' }, tool);
    assert.equal(asked + 1, surface.requests.length, 'a denied loop is not asked again');
    assert.equal(21, runs());
    assert.equal('blocked', blocked.details?.status);
    assert.match(blocked.content[0].text, /read.*identical/i);
  });

  test('nobody answers: OpenClaw denies the call when approvalTimeoutMs runs out, with the loop\'s reason, and the daemon takes it as a denial', async () => {
    const scope = session('silent');
    answers.push(null);
    const before = await metricValue(daemon.metricsAddress, 'loopwarden_approvals_total', { answer: 'denied', agent: 'coder' });
    const started = Date.now();
    const { result, requests, tool, runs } = await loopUntilAsked(scope, { path: 'silent.txt' });
    assert.equal(1, requests.length);
    assert.ok(Date.now() - started >= APPROVAL_TIMEOUT_MS);
    assert.equal(20, runs());
    assert.equal('blocked', result.details?.status);
    assert.match(result.content[0].text, /Nobody answered within 1 s, so the call did not run/);
    assert.match(result.content[0].text, /identical/);
    assert.equal(before + 1, await metricValue(daemon.metricsAddress, 'loopwarden_approvals_total', { answer: 'denied', agent: 'coder' }));
    const asked = surface.requests.length;
    const blocked = await openclaw.callTool(scope, 'read', { path: 'silent.txt' }, tool);
    assert.equal(asked, surface.requests.length, 'not asked again');
    assert.equal('blocked', blocked.details?.status);
  });
});
