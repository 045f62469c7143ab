// @ts-check
// Sub-agents and user turns through OpenClaw's own plugin loader and hook dispatch, against a real
// daemon: a child session (subagent_spawned) is a child run of its parent's session, and a new
// OpenClaw run in a session is a user turn.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LoopwardenClient } from '@loopwarden/client';
import { DETECTION_ON, startDaemon } from './support/daemon.js';
import { loadWithOpenClaw } from './support/openclaw-host.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */
/** @typedef {import('./support/openclaw-host.js').OpenClawHost} OpenClawHost */
/** @typedef {import('./support/openclaw-host.js').Scope} Scope */

const same = () => ({ content: [{ type: 'text', text: 'line 1\nline 2' }], details: { path: 'notes.txt' } });

/** @param {any} result the tool result the model reads */
const appended = (result) => result.content.slice(1).map((/** @type {any} */ entry) => entry.text);

describe('sub-agents and user turns, loaded by OpenClaw\'s plugin loader', () => {
  /** @type {Daemon} */
  let daemon;
  /** @type {OpenClawHost} */
  let openclaw;
  /** @type {LoopwardenClient} */
  let inspector;
  before(async () => {
    daemon = await startDaemon(DETECTION_ON);
    openclaw = await loadWithOpenClaw({ target: daemon.grpcTarget });
    inspector = new LoopwardenClient(daemon.grpcTarget);
  });
  after(async () => {
    inspector?.close();
    await openclaw?.hookRunner?.runGatewayStop?.({ reason: 'test' }, {});
    await daemon?.stop();
  });

  test('OpenClaw dispatches subagent_spawned to the plugin', () => {
    const hooks = openclaw.registry.typedHooks.filter((/** @type {any} */ h) => h.pluginId === 'loopwarden').map((/** @type {any} */ h) => h.hookName);
    assert.ok(hooks.includes('subagent_spawned'), JSON.stringify(hooks));
    assert.equal(true, openclaw.hookRunner.hasHooks('subagent_spawned'));
  });

  test('a stuck sub-agent is blocked without its siblings being warned, and its parent\'s next call carries the child_stopped warning', async () => {
    /** @type {Scope} */
    const parent = { runId: 'oc-parent-run', sessionId: 'oc-parent-session', sessionKey: 'agent:coder:main', agentId: 'coder' };
    assert.deepEqual([], appended(await openclaw.callTool(parent, 'read', { path: 'plan.md' }, same)));
    /** @type {Scope[]} */
    const children = [];
    for (const name of ['stuck', 'sibling-a', 'sibling-b']) {
      const childSessionKey = `agent:coder:subagent:${name}`;
      // What OpenClaw's sessions_spawn tool dispatches once the child's run is launched.
      await openclaw.hookRunner.runSubagentSpawned(
        { runId: `oc-${name}-run`, childSessionKey, agentId: 'coder', label: name, mode: 'run', threadRequested: false },
        { runId: `oc-${name}-run`, childSessionKey, requesterSessionKey: parent.sessionKey });
      children.push({ runId: `oc-${name}-run`, sessionId: `oc-${name}-session`, sessionKey: childSessionKey, agentId: 'coder' });
    }
    const [stuck, ...siblings] = children;

    /** @type {string[]} */
    const siblingNotes = [];
    for (let i = 1; i <= 8; i++) {
      for (const sibling of siblings) siblingNotes.push(...appended(await openclaw.callTool(sibling, 'read', { path: 'README.md' }, same)));
    }
    let ran = 0;
    const results = [];
    for (let i = 1; i <= 21; i++) results.push(await openclaw.callTool(stuck, 'read', { path: 'README.md' }, () => { ran += 1; return same(); }));
    for (const sibling of siblings) siblingNotes.push(...appended(await openclaw.callTool(sibling, 'read', { path: 'README.md' }, same)));

    assert.equal(20, ran, 'the stuck sub-agent\'s 21st identical call is not run');
    assert.equal('blocked', results[20].details?.status);
    assert.match(results[20].content[0].text, /read.*identical/i);
    assert.deepEqual([], siblingNotes, 'each sub-agent keeps its own history: 9 reads each warn nobody');

    const next = await openclaw.callTool(parent, 'read', { path: 'plan.md' }, () => ({ content: [{ type: 'text', text: 'the plan v2' }], details: {} }));
    const notes = appended(next);
    assert.equal(1, notes.length, JSON.stringify(next));
    assert.match(notes[0], /sub-agent run 'oc-stuck-session' was stopped: generic_repeat on read/);

    const child = await inspector.inspect(stuck.sessionId);
    assert.equal(parent.sessionId, child.parentRunId);
    assert.equal(parent.sessionId, child.rootRunId);
    const root = await inspector.inspect(parent.sessionId);
    assert.deepEqual(children.map((c) => c.sessionId).sort(), [...root.children].sort());
  });

  test('a new OpenClaw run in the session is a user turn: the call blocked in the last run runs again', async () => {
    /** @type {Scope} */
    const first = { runId: 'oc-turn-1', sessionId: 'oc-turn-session', sessionKey: 'agent:coder:turns', agentId: 'coder' };
    let ran = 0;
    const tool = () => { ran += 1; return same(); };
    for (let i = 1; i <= 21; i++) await openclaw.callTool(first, 'read', { path: 'notes.txt' }, tool);
    assert.equal(20, ran);
    const blockedAgain = await openclaw.callTool(first, 'read', { path: 'notes.txt' }, tool);
    assert.equal('blocked', blockedAgain.details?.status, 'in the same OpenClaw run the block stays');

    const second = { ...first, runId: 'oc-turn-2' };
    const result = await openclaw.callTool(second, 'read', { path: 'notes.txt' }, tool);
    assert.equal(21, ran, 'the user\'s new message lifted the block: the call ran');
    assert.notEqual('blocked', result.details?.status);
    const view = await inspector.inspect(first.sessionId);
    assert.equal(1, view.records.length, 'one loopwarden run for the session, its history started over at the turn');
  });
});
