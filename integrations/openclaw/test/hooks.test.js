// @ts-check
// The plugin's registered hook handlers, driven with OpenClaw-shaped payloads, against a real
// daemon (detection on, documented defaults).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LoopwardenClient, RunNotFound } from '@loopwarden/client';
import { DETECTION_ON, closedAddress, metricValue, silentServer, startDaemon } from './support/daemon.js';
import { callTool, loadPlugin } from './support/host.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */
/** @typedef {import('./support/host.js').RunScope} RunScope */

let scopes = 0;
/** @param {string} [agentId] @returns {RunScope} */
function newRun(agentId = 'coder') {
  scopes += 1;
  return { runId: `run-${process.pid}-${scopes}`, sessionId: `session-${scopes}`, sessionKey: `agent:${agentId}:s${scopes}`, agentId };
}

const sameResult = () => ({ content: [{ type: /** @type {const} */ ('text'), text: 'line 1\nline 2' }], details: { path: 'notes.txt' } });

describe('against a daemon with detection on', () => {
  /** @type {Daemon} */
  let daemon;
  before(async () => { daemon = await startDaemon(DETECTION_ON); });
  after(async () => { await daemon?.stop(); });

  test('registers before_tool_call, after_tool_call, after_compaction and session_end, and tool-result middleware', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    try {
      assert.deepEqual(['before_tool_call', 'after_tool_call', 'after_compaction', 'session_end', 'subagent_spawned', 'gateway_stop'],
        plugin.hookNames);
      assert.deepEqual([{ runtimes: ['openclaw', 'codex'] }], plugin.middlewareOptions);
    } finally {
      await plugin.dispose();
    }
  });

  test('21 identical calls with identical results: calls 1-20 run, the 21st is blocked with the block message', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const scope = newRun();
    const blocksBefore = await metricValue(daemon.metricsAddress, 'loopwarden_blocks_total', { detector: 'generic_repeat', agent: 'coder' });
    try {
      const reports = [];
      for (let i = 1; i <= 21; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult));
      assert.deepEqual(Array(20).fill(false), reports.slice(0, 20).map((r) => r.blocked));
      const blocked = reports[20];
      assert.equal(true, blocked.blocked);
      // The daemon's own wording (spec section 6); only its subject is pinned here.
      assert.match(blocked.blockReason ?? '', /read.*identical/i);
      assert.equal(blocked.blockReason, blocked.seenByModel.content[0].text, 'the model reads the block message');
      const blocksAfter = await metricValue(daemon.metricsAddress, 'loopwarden_blocks_total', { detector: 'generic_repeat', agent: 'coder' });
      assert.equal(blocksBefore + 1, blocksAfter);
    } finally {
      await plugin.dispose();
    }
  });

  test('the 11th identical call runs with the announced warning appended to its result, and the note is not progress', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const scope = newRun();
    try {
      const reports = [];
      for (let i = 1; i <= 21; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult));
      const noted = reports.map((r, i) => [i + 1, r.seenByModel.content.length]).filter(([, n]) => n > 1).map(([i]) => i);
      assert.deepEqual([11], noted, 'only the announced warning is appended');
      const note = reports[10].seenByModel.content.at(-1);
      assert.match(note?.text ?? '', /identical arguments/i);
      assert.equal(false, reports[10].blocked);
      // Had the note been reported as part of the 11th result, the streak would restart there.
      assert.equal(true, reports[20].blocked);
      assert.ok(plugin.logs.some((l) => l.level === 'warn' && l.message.includes(note?.text ?? '\u0000')));
    } finally {
      await plugin.dispose();
    }
  });

  test('a blocked call stays blocked: OpenClaw\'s blocked result for it is not taken as a new result', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const scope = newRun();
    try {
      for (let i = 1; i <= 21; i++) await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult);
      const again = await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult);
      assert.equal(true, again.blocked);
      const other = await callTool(plugin, scope, 'read', { path: 'other.txt' }, sameResult);
      assert.equal(false, other.blocked, 'other arguments still run');
    } finally {
      await plugin.dispose();
    }
  });

  test('OpenClaw\'s agent id selects the daemon\'s per-agent tools.loopDetection', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const scope = newRun('strict');
    try {
      const reports = [];
      for (let i = 1; i <= 5; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult));
      assert.deepEqual([false, false, false, false, true], reports.map((r) => r.blocked));
    } finally {
      await plugin.dispose();
    }
  });

  test('the agentId setting overrides OpenClaw\'s', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget, agentId: 'strict' });
    const scope = newRun('coder');
    try {
      const reports = [];
      for (let i = 1; i <= 5; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult));
      assert.equal(true, reports[4].blocked);
    } finally {
      await plugin.dispose();
    }
  });

  test('changing results are never blocked by the repeat detector', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const scope = newRun();
    try {
      let n = 0;
      const changing = () => ({ content: [{ type: /** @type {const} */ ('text'), text: `tick ${++n}` }], details: {} });
      const reports = [];
      for (let i = 1; i <= 25; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'log.txt' }, changing));
      assert.deepEqual([], reports.filter((r) => r.blocked));
    } finally {
      await plugin.dispose();
    }
  });

  test('a session is one run: a new OpenClaw run in it is a user turn, and the call blocked in the last one runs again', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    const first = newRun();
    try {
      for (let i = 1; i <= 20; i++) await callTool(plugin, first, 'read', { path: 'notes.txt' }, sameResult);
      assert.equal(true, (await callTool(plugin, first, 'read', { path: 'notes.txt' }, sameResult)).blocked);
      const next = { ...first, runId: `${first.runId}-next` };
      const report = await callTool(plugin, next, 'read', { path: 'notes.txt' }, sameResult);
      assert.equal(false, report.blocked);
      const view = await inspector.inspect(first.sessionId);
      assert.equal(1, view.records.length, 'the user turn cleared the history; the new turn\'s call is its only record');
    } finally {
      inspector.close();
      await plugin.dispose();
    }
  });

  test('after_compaction arms the guard: a loop that persists aborts the run, ends it in OpenClaw and blocks what follows', async () => {
    /** @type {string[]} */
    const ended = [];
    const plugin = loadPlugin({ target: daemon.grpcTarget }, { abortRun: (sessionId) => { ended.push(sessionId); return true; } });
    const scope = newRun();
    try {
      await plugin.afterCompaction({ messageCount: 40, compactedCount: 32, tokenCount: 9000 },
        { runId: scope.runId, sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: scope.agentId });
      assert.ok(plugin.logs.some((l) => /post-compaction guard armed for 3 attempts/.test(l.message)), JSON.stringify(plugin.logs));
      for (let i = 1; i <= 3; i++) assert.equal(false, (await callTool(plugin, scope, 'exec', { command: 'make' }, sameResult)).blocked);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual([scope.sessionId], ended, 'the run is ended once, by its session id');
      const next = await callTool(plugin, scope, 'read', { path: 'other.txt' }, sameResult);
      assert.equal(true, next.blocked, 'an aborted run stays aborted');
      assert.match(next.blockReason ?? '', /compaction/);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual([scope.sessionId], ended);
      assert.ok(plugin.logs.some((l) => l.level === 'error' && /compaction_loop_persisted/.test(l.message)));
    } finally {
      await plugin.dispose();
    }
  });

  test('a session aborted in an earlier OpenClaw run starts over at its next run', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget }, { abortRun: () => true });
    const scope = newRun();
    try {
      await plugin.afterCompaction({ messageCount: 1, compactedCount: 1 }, { runId: scope.runId, sessionId: scope.sessionId });
      for (let i = 1; i <= 3; i++) await callTool(plugin, scope, 'exec', { command: 'make' }, sameResult);
      assert.equal(true, (await callTool(plugin, scope, 'read', { path: 'x' }, sameResult)).blocked, 'aborted');
      const next = { ...scope, runId: `${scope.runId}-next` };
      assert.equal(false, (await callTool(plugin, next, 'read', { path: 'x' }, sameResult)).blocked);
      assert.ok(plugin.logs.some((l) => /was aborted in an earlier OpenClaw run; starting it over/.test(l.message)), JSON.stringify(plugin.logs));
    } finally {
      await plugin.dispose();
    }
  });

  test('a child session known only from OpenClaw\'s session store (parentSessionKey) is a child run of its parent', async () => {
    const parent = newRun();
    const child = { ...newRun(), sessionKey: `${parent.sessionKey}:subagent:x` };
    const orphan = { ...newRun(), sessionKey: `${parent.sessionKey}:subagent:orphan` };
    const plugin = loadPlugin({ target: daemon.grpcTarget }, {}, {
      [child.sessionKey]: { parentSessionKey: parent.sessionKey, spawnedBy: parent.sessionKey },
      // A parent that never made a call here: its incarnation from the store.
      [orphan.sessionKey]: { parentSessionKey: 'agent:coder:elsewhere', parentSessionId: 'session-elsewhere' },
    });
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    try {
      await callTool(plugin, parent, 'read', { path: 'plan.md' }, sameResult);
      await callTool(plugin, child, 'read', { path: 'plan.md' }, sameResult);
      await callTool(plugin, orphan, 'read', { path: 'plan.md' }, sameResult);
      assert.equal(parent.sessionId, (await inspector.inspect(child.sessionId)).parentRunId);
      assert.equal('session-elsewhere', (await inspector.inspect(orphan.sessionId)).parentRunId);
      assert.equal('', (await inspector.inspect(parent.sessionId)).parentRunId);
    } finally {
      inspector.close();
      await plugin.dispose();
    }
  });

  test('with abortRun off, an ABORT only blocks', async () => {
    /** @type {string[]} */
    const ended = [];
    const plugin = loadPlugin({ target: daemon.grpcTarget, abortRun: false }, { abortRun: (sessionId) => { ended.push(sessionId); return true; } });
    const scope = newRun();
    try {
      await plugin.afterCompaction({ messageCount: 1, compactedCount: 1 }, { runId: scope.runId, sessionId: scope.sessionId });
      for (let i = 1; i <= 3; i++) await callTool(plugin, scope, 'exec', { command: 'make' }, sameResult);
      assert.equal(true, (await callTool(plugin, scope, 'exec', { command: 'make' }, sameResult)).blocked);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual([], ended);
    } finally {
      await plugin.dispose();
    }
  });

  test('session_end frees every run of the session on the daemon', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    const scope = newRun();
    try {
      await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult);
      await callTool(plugin, scope, 'read', { path: 'other.txt' }, sameResult);
      assert.equal(2, (await inspector.inspect(scope.sessionId)).records.length);
      const outside = { ...scope, sessionId: '', runId: '' };
      await callTool(plugin, outside, 'read', { path: 'notes.txt' }, sameResult);
      assert.equal(1, (await inspector.inspect(`session:${scope.sessionKey}`)).records.length, 'a call without a session id: keyed by the session key');
      // The next incarnation of the same session key (after /new) has begun already.
      const nextIncarnation = { ...scope, sessionId: `${scope.sessionId}-new`, runId: `${scope.runId}-new` };
      await callTool(plugin, nextIncarnation, 'read', { path: 'notes.txt' }, sameResult);
      await plugin.sessionEnd({ sessionId: scope.sessionId, sessionKey: scope.sessionKey, messageCount: 4, reason: 'new' },
        { sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: scope.agentId });
      await assert.rejects(inspector.inspect(scope.sessionId), RunNotFound);
      await assert.rejects(inspector.inspect(`session:${scope.sessionKey}`), RunNotFound);
      assert.equal(1, (await inspector.inspect(nextIncarnation.sessionId)).records.length, 'the next incarnation is not ended with the old one');
    } finally {
      inspector.close();
      await plugin.dispose();
    }
  });

  test('the outcome names the arguments the call was asked with, and a tool error is reported as an error', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    const scope = newRun();
    try {
      /** @type {import('./support/host.js').ToolContext} */
      const ctx = { toolName: 'exec', toolCallId: 'c-err', runId: scope.runId, sessionId: scope.sessionId, agentId: 'coder' };
      await plugin.beforeToolCall({ toolName: 'exec', params: { command: 'ls' }, runId: scope.runId, toolCallId: 'c-err' }, ctx);
      // Another plugin rewrote the params in between: the outcome still fills the call's record.
      await plugin.afterToolCall({ toolName: 'exec', params: { command: 'ls', cwd: '/tmp' }, runId: scope.runId, toolCallId: 'c-err',
        error: 'Tool frobnicate not found' }, ctx);
      const { records } = await inspector.inspect(scope.sessionId);
      assert.equal(1, records.length, JSON.stringify(records));
      assert.notEqual('', records[0].resultHash);
    } finally {
      inspector.close();
      await plugin.dispose();
    }
  });
});

describe('against a daemon with loopwarden.onCritical "ask"', () => {
  /** @type {Daemon} */
  let daemon;
  before(async () => { daemon = await startDaemon({ ...DETECTION_ON, loopwarden: { onCritical: 'ask' } }); });
  after(async () => { await daemon?.stop(); });

  test('ask false: calls are sent without accepts_ask, so the daemon blocks the loop instead of asking', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget, ask: false });
    const scope = newRun();
    try {
      const reports = [];
      for (let i = 1; i <= 21; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult));
      assert.equal(true, reports[20].blocked);
      assert.match(reports[20].blockReason ?? '', /read.*identical/i);
    } finally {
      await plugin.dispose();
    }
  });

  test('ask true: the 21st call is answered with requireApproval, and allow-once reaches the daemon before the outcome', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget, approvalTimeoutMs: 30_000 });
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    const scope = newRun();
    try {
      for (let i = 1; i <= 20; i++) await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult);
      const ctx = { toolName: 'read', toolCallId: 'asked-1', runId: scope.runId, sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: 'coder' };
      const decision = await plugin.beforeToolCall({ toolName: 'read', params: { path: 'notes.txt' }, runId: scope.runId, toolCallId: 'asked-1' }, ctx);
      const approval = decision?.requireApproval;
      assert.ok(approval, JSON.stringify(decision));
      assert.equal(undefined, decision?.block);
      assert.equal(30_000, approval.timeoutMs);
      assert.match(approval.description, /held for a person/);
      approval.onResolution?.('allow-once');
      await plugin.afterToolCall({ toolName: 'read', params: { path: 'notes.txt' }, runId: scope.runId, toolCallId: 'asked-1', result: sameResult() }, ctx);
      const { records } = await inspector.inspect(scope.sessionId);
      assert.equal(21, records.length, 'the approved call ran and its outcome filled its record');
      assert.deepEqual([], plugin.logs.filter((l) => /the answer to/.test(l.message)), JSON.stringify(plugin.logs));
    } finally {
      inspector.close();
      await plugin.dispose();
    }
  });

  test('an approval OpenClaw could show nobody (cancelled) is a denial, and the log says why nothing could answer it', async () => {
    const plugin = loadPlugin({ target: daemon.grpcTarget });
    const scope = newRun();
    try {
      for (let i = 1; i <= 20; i++) await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult);
      const ctx = { toolName: 'read', toolCallId: 'asked-2', runId: scope.runId, sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: 'coder' };
      const decision = await plugin.beforeToolCall({ toolName: 'read', params: { path: 'notes.txt' }, runId: scope.runId, toolCallId: 'asked-2' }, ctx);
      decision?.requireApproval?.onResolution?.('cancelled');
      await plugin.afterToolCall({ toolName: 'read', params: { path: 'notes.txt' }, runId: scope.runId, toolCallId: 'asked-2', error: 'Plugin approval unavailable' }, ctx);
      const line = plugin.logs.find((l) => /OpenClaw could not ask anyone/.test(l.message));
      assert.equal('warn', line?.level, JSON.stringify(plugin.logs));
      assert.match(line?.message ?? '', /openclaw agent, cron or heartbeat.*so the call is denied.*ask: false/);
      const next = await callTool(plugin, scope, 'read', { path: 'notes.txt' }, sameResult);
      assert.equal(true, next.blocked, 'denied: the loop\'s next call is blocked without asking');
    } finally {
      await plugin.dispose();
    }
  });
});

describe('against a daemon with a toolSecondsPerTree budget', () => {
  /** @type {Daemon} */
  let daemon;
  before(async () => { daemon = await startDaemon({ ...DETECTION_ON, loopwarden: { budgets: { toolSecondsPerTree: 2 } } }); });
  after(async () => { await daemon?.stop(); });

  test('after_tool_call\'s durationMs feeds the tree\'s tool time: a sub-agent\'s slow tool spends its parent\'s budget', async () => {
    const parent = newRun();
    const child = { ...newRun(), sessionKey: `${parent.sessionKey}:subagent:slow` };
    const plugin = loadPlugin({ target: daemon.grpcTarget }, {}, { [child.sessionKey]: { parentSessionKey: parent.sessionKey } });
    try {
      assert.equal(false, (await callTool(plugin, parent, 'read', { path: 'plan.md' }, sameResult)).blocked);
      const ctx = { toolName: 'exec', toolCallId: 'slow-1', runId: child.runId, sessionId: child.sessionId, sessionKey: child.sessionKey, agentId: 'coder' };
      await plugin.beforeToolCall({ toolName: 'exec', params: { command: 'make' }, runId: child.runId, toolCallId: 'slow-1' }, ctx);
      await plugin.afterToolCall({ toolName: 'exec', params: { command: 'make' }, runId: child.runId, toolCallId: 'slow-1',
        result: sameResult(), durationMs: 2500 }, ctx);
      const next = await callTool(plugin, parent, 'read', { path: 'other.md' }, sameResult);
      assert.equal(true, next.blocked, 'the tree spent 2.5 s of its 2');
      assert.match(next.blockReason ?? '', /budget/i);
    } finally {
      await plugin.dispose();
    }
  });
});

describe('when the daemon cannot answer', () => {
  const scope = { runId: 'run-down', sessionId: 'session-down', sessionKey: 'agent:coder:down', agentId: 'coder' };

  test('no daemon listening: every hook fails open, quietly after the first log line', async () => {
    const plugin = loadPlugin({ target: await closedAddress(), timeoutMs: 5000 });
    try {
      const started = Date.now();
      const reports = [];
      for (let i = 0; i < 3; i++) reports.push(await callTool(plugin, scope, 'read', { path: 'a' }, sameResult));
      await plugin.afterCompaction({ messageCount: 1, compactedCount: 1 }, { runId: scope.runId, sessionId: scope.sessionId });
      await plugin.sessionEnd({ sessionId: scope.sessionId, messageCount: 1 }, { sessionId: scope.sessionId });
      assert.deepEqual([false, false, false], reports.map((r) => r.blocked));
      assert.deepEqual([true, true, true], reports.map((r) => r.ran));
      assert.ok(Date.now() - started < 5000, 'refused connections are not waited out');
      const warnings = plugin.logs.filter((l) => l.level === 'warn');
      assert.equal(1, warnings.length, JSON.stringify(plugin.logs));
      assert.match(warnings[0].message, /running read unguarded/);
      assert.deepEqual([], plugin.logs.filter((l) => l.level === 'error'));
    } finally {
      await plugin.dispose();
    }
  });

  test('no daemon listening, failOpen false: the call is blocked with a reason', async () => {
    const plugin = loadPlugin({ target: await closedAddress(), failOpen: false });
    try {
      const report = await callTool(plugin, scope, 'read', { path: 'a' }, sameResult);
      assert.equal(true, report.blocked);
      assert.match(report.blockReason ?? '', /loopwarden\) is unavailable and is set to fail closed/);
    } finally {
      await plugin.dispose();
    }
  });

  test('a daemon that accepts and never answers: the call runs after timeoutMs, not after OpenClaw\'s 15 s', async () => {
    const hung = await silentServer();
    const plugin = loadPlugin({ target: hung.address, timeoutMs: 300 });
    try {
      const started = Date.now();
      const decision = await plugin.beforeToolCall({ toolName: 'read', params: { path: 'a' }, runId: scope.runId, toolCallId: 'hung-1' },
        { toolName: 'read', runId: scope.runId, toolCallId: 'hung-1' });
      const elapsed = Date.now() - started;
      assert.equal(undefined, decision);
      assert.ok(elapsed >= 250 && elapsed < 3000, `answered after ${elapsed} ms`);
      assert.match(plugin.logs.map((l) => l.message).join('\n'), /no answer to the read call within 300 ms/);
    } finally {
      await plugin.dispose();
      await hung.close();
    }
  });

  test('a hook with nothing to key a run on lets the call run without asking', async () => {
    const plugin = loadPlugin({ target: await closedAddress(), failOpen: false });
    try {
      assert.equal(undefined, await plugin.beforeToolCall({ toolName: 'read', params: {} }, { toolName: 'read' }));
      assert.deepEqual([], plugin.logs);
    } finally {
      await plugin.dispose();
    }
  });
});
