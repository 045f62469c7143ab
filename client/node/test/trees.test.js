// @ts-check
// Run trees, usage, approvals, ASK and the exemption RPCs in the Node client, against a
// scripted gRPC service: what the client puts on the wire (routing headers, fields) and how it
// reads what comes back (an action it does not know is 'block'). The daemon's semantics are
// covered by the shared conformance scenarios (conformance.test.js).
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import grpc from '@grpc/grpc-js';

import {
  ExemptionNotFound, LoopwardenClient, approvalEvent, guardTool, loadService, modelOutputEvent, toolCallEvent, toolOutcomeEvent,
  usageEvent, verdictFromMessage,
} from '../src/index.js';
import { RunTrees } from '../src/trees.js';

const SAME = { content: [{ type: 'text', text: 'same' }] };
const UNKNOWN_ACTION = 99; // an action a newer daemon might send

/** The scripted service: records (header, event) pairs, answers tool calls with scripted actions. */
const scripted = {
  /** @type {[string, any][]} */ received: [],
  /** @type {string[]} */ streams: [],
  /** @type {[string, string][]} */ inspected: [],
  /** @type {(string | number)[]} */ script: [],
  /** @type {any} */ listed: null,
  reset() {
    this.received = []; this.streams = []; this.inspected = []; this.script = []; this.listed = null;
  },
  /** @param {string} header @param {any} event */
  verdict(header, event) {
    this.received.push([header, event]);
    const action = event.toolCall && this.script.length ? this.script.shift() : 'ACTION_ALLOW';
    return {
      seq: event.seq, runId: event.runId, action, decisionId: `d-${event.seq}`,
      message: action === 'ACTION_ASK' ? 'CRITICAL: held for a human' : '',
    };
  },
  kinds() {
    return this.received.map(([, e]) => ['toolCall', 'toolOutcome', 'usage', 'approval', 'runEnd', 'userTurn']
      .find((k) => e[k]));
  },
  /** @returns {Record<string, string[]>} */
  headersByRun() {
    /** @type {Record<string, Set<string>>} */
    const seen = {};
    for (const [header, event] of this.received) (seen[event.runId] ??= new Set()).add(header);
    return Object.fromEntries(Object.entries(seen).map(([run, headers]) => [run, [...headers]]));
  },
};

/** @param {any} call */
const headerOf = (call) => String(call.metadata.get('x-loopwarden-run-id')[0] ?? '');

const EXEMPTION = {
  id: 'ex-1', agentId: 'coder', toolName: 'read', argsHash: 'h1', createdAt: 10, expiresAt: 3610, runId: 'root',
};

/** @type {grpc.Server} */
let server;
/** @type {string} */
let target;

before(async () => {
  server = new grpc.Server();
  server.addService(loadService().service, {
    Evaluate: (/** @type {any} */ call) => {
      const header = headerOf(call);
      scripted.streams.push(header);
      call.on('data', (/** @type {any} */ request) => {
        call.write({ verdicts: request.events.map((/** @type {any} */ e) => scripted.verdict(header, e)) });
      });
      call.on('end', () => call.end());
    },
    Check: (/** @type {any} */ call, /** @type {any} */ callback) => {
      callback(null, { verdict: scripted.verdict(headerOf(call), call.request.event) });
    },
    InspectRun: (/** @type {any} */ call, /** @type {any} */ callback) => {
      scripted.inspected.push([headerOf(call), call.request.runId]);
      callback(null, {
        runId: call.request.runId, parentRunId: 'root', children: ['grandchild-1', 'grandchild-2'], rootRunId: 'root',
        depth: 1, treeTotals: { toolCalls: 31, toolMs: 1500, inputTokens: 900, outputTokens: 100, costUsd: 0.25, wallSeconds: 12.5, runs: 4 },
        runTotals: { toolCalls: 8, runs: 1 }, exemptions: [EXEMPTION],
      });
    },
    ListExemptions: (/** @type {any} */ call, /** @type {any} */ callback) => {
      scripted.listed = call.request;
      callback(null, { exemptions: [EXEMPTION] });
    },
    RevokeExemption: (/** @type {any} */ call, /** @type {any} */ callback) => {
      if (call.request.id !== 'ex-1') callback({ code: grpc.status.NOT_FOUND, details: `no exemption ${call.request.id}` });
      else callback(null, { revoked: EXEMPTION });
    },
  });
  const port = await new Promise((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  target = `127.0.0.1:${port}`;
});

after(() => server?.forceShutdown());

beforeEach(() => scripted.reset());

describe('actions', () => {
  test('ACTION_ASK reads as ask, and may not run', () => {
    assert.equal(verdictFromMessage({ action: 'ACTION_ASK' }).action, 'ask');
  });

  test('an action the client does not know reads as block, by name or by number', () => {
    const byNumber = verdictFromMessage({ action: UNKNOWN_ACTION, shadow: true, shadowAction: UNKNOWN_ACTION });
    assert.deepStrictEqual([byNumber.action, byNumber.shadowAction], ['block', 'block']);
    assert.equal(verdictFromMessage({ action: 'ACTION_SOMETHING_NEW' }).action, 'block');
  });

  test('over the wire an unknown action is block, and the guard does not run the tool', async () => {
    scripted.script = [UNKNOWN_ACTION, UNKNOWN_ACTION];
    const client = new LoopwardenClient(target);
    let runs = 0;
    try {
      assert.equal((await client.toolCall('r', 'read', { p: 1 })).action, 'block');
      const result = /** @type {any} */ (await guardTool(client, 'r', 'read', async () => { runs += 1; return SAME; })({ p: 1 }));
      assert.deepStrictEqual([runs, result.details.status], [0, 'blocked']);
    } finally {
      client.close();
    }
  });
});

describe('event builders', () => {
  test('usage, approval, duration and the tree fields', () => {
    const usage = usageEvent('c', { inputTokens: 500, outputTokens: 100, costUsd: 0.5, model: 'm', parentRunId: 'root' });
    assert.deepStrictEqual([usage.usage, usage.parentRunId, usage.acceptsAsk],
      [{ inputTokens: 500, outputTokens: 100, costUsd: 0.5, model: 'm' }, 'root', false]);
    const always = approvalEvent('r', { approved: true, decisionId: 'd-9', scope: 'always', ttlSeconds: 60, acceptsAsk: true });
    assert.deepStrictEqual([always.approval, always.acceptsAsk], [
      { toolCallId: '', decisionId: 'd-9', approved: true, scope: 'APPROVAL_SCOPE_ALWAYS', ttlSeconds: 60 }, true]);
    assert.equal(approvalEvent('r', { approved: false, toolCallId: 'c' }).approval.scope, 'APPROVAL_SCOPE_UNSPECIFIED');
    assert.equal(toolOutcomeEvent('r', 'read', {}, { result: 1, durationMs: 1234 }).toolOutcome.durationMs, 1234);
    assert.equal(toolCallEvent('c', 'read', {}, { parentRunId: 'p' }).parentRunId, 'p');
  });

  test('a model output: its text or digest, kind, stop flag and optional usage', () => {
    const said = modelOutputEvent('r', {
      text: 'Done.', outputKind: 'final_answer', stopHookActive: true, usage: { inputTokens: 7, costUsd: 0.25 },
    });
    assert.deepStrictEqual(said.modelOutput, {
      text: 'Done.', textDigest: '', outputKind: 'OUTPUT_KIND_FINAL_ANSWER', stopHookActive: true,
      usage: { inputTokens: 7, outputTokens: 0, costUsd: 0.25, model: '' },
    });
    const thought = modelOutputEvent('r', { textDigest: 'd1', outputKind: 'thought' }).modelOutput;
    assert.deepStrictEqual([thought.textDigest, thought.outputKind, 'usage' in thought], ['d1', 'OUTPUT_KIND_THOUGHT', false]);
    assert.equal(modelOutputEvent('r', { text: 'hi' }).modelOutput.outputKind, 'OUTPUT_KIND_UNSPECIFIED');
    assert.throws(() => modelOutputEvent('r', { text: 'x', outputKind: /** @type {any} */ ('shout') }), /outputKind/);
  });

  test('a bad approval is a TypeError naming the field', () => {
    assert.throws(() => approvalEvent('r', { approved: true }), /toolCallId or decisionId/);
    assert.throws(() => approvalEvent('r', { approved: true, toolCallId: 'c', scope: /** @type {any} */ ('forever') }), /scope/);
    assert.throws(() => approvalEvent('r', { approved: /** @type {any} */ ('yes'), toolCallId: 'c' }), /approved/);
  });
});

describe('child runs route by their root', () => {
  test('RunTrees: a child\'s root is its parent\'s; an explicit root wins; bounded', () => {
    const trees = new RunTrees(3);
    trees.learn('child', 'root');
    trees.learn('grandchild', 'child');
    trees.learn('remote', 'someone', 'far-root');
    assert.deepStrictEqual(['root', 'child', 'grandchild', 'remote', 'stranger'].map((r) => trees.root(r)),
      ['root', 'root', 'root', 'far-root', 'stranger']);
    trees.learn('c4', 'root'); // past capacity 3: the least recently used ('child') is forgotten
    assert.equal(trees.root('child'), 'child');
  });

  test('per_run mode: one stream for the tree, its header the root; a child\'s end keeps it open', async () => {
    const client = new LoopwardenClient(target, { streams: 'per_run' });
    try {
      const tool = async () => SAME;
      await guardTool(client, 'root', 'read', tool)({ p: 1 });
      await guardTool(client, 'child', 'read', tool, { parentRunId: 'root' })({ p: 1 });
      await guardTool(client, 'grandchild', 'read', tool, { parentRunId: 'child' })({ p: 1 });
      await client.runEnd('grandchild');
      assert.equal(client.rootOf('child'), 'root');
      await client.runEnd('root');
    } finally {
      client.close();
    }
    assert.deepStrictEqual(scripted.headersByRun(), { root: ['root'], child: ['root'], grandchild: ['root'] });
    assert.deepStrictEqual(scripted.streams, ['root']);
  });

  test('check and inspect of a child carry the root\'s header; rootRunId routes an unseen chain', async () => {
    const client = new LoopwardenClient(target, { streams: 'per_run' });
    try {
      await client.check(toolCallEvent('child', 'read', {}, { parentRunId: 'root' }));
      await client.inspect('child');
      await client.usage('sub', { parentRunId: 'orchestrator', rootRunId: 'session-root', inputTokens: 3 });
    } finally {
      client.close();
    }
    assert.deepStrictEqual(scripted.inspected, [['root', 'child']]);
    assert.deepStrictEqual(scripted.headersByRun(), { child: ['root'], sub: ['session-root'] });
  });
});

describe('ASK in guardTool', () => {
  test('no onAsk: the events do not accept ASK', async () => {
    const client = new LoopwardenClient(target);
    try {
      await guardTool(client, 'r', 'read', async () => SAME)({});
    } finally {
      client.close();
    }
    assert.deepStrictEqual([...new Set(scripted.received.map(([, e]) => e.acceptsAsk))], [false]);
  });

  test('approved always: the answer is reported, the tool runs, its outcome carries durationMs', async () => {
    scripted.script = ['ACTION_ASK'];
    const client = new LoopwardenClient(target);
    /** @type {string[]} */
    const asked = [];
    let runs = 0;
    try {
      const read = guardTool(client, 'r', 'read', async () => { runs += 1; return SAME; },
        { toolCallId: 'c21', onAsk: (v) => { asked.push(v.message); return 'always'; } });
      assert.deepStrictEqual(await read({ p: 1 }), SAME);
    } finally {
      client.close();
    }
    assert.deepStrictEqual([runs, asked], [1, ['CRITICAL: held for a human']]);
    assert.deepStrictEqual(scripted.kinds(), ['toolCall', 'approval', 'toolOutcome']);
    const { approval } = scripted.received[1][1];
    assert.deepStrictEqual([approval.toolCallId, approval.approved, approval.scope], ['c21', true, 'APPROVAL_SCOPE_ALWAYS']);
    assert.ok(scripted.received.every(([, e]) => e.acceptsAsk));
    assert.ok(scripted.received[2][1].toolOutcome.durationMs >= 0);
  });

  test('denied: the blocked result, the tool not run, the approval names the ASK\'s decision id', async () => {
    scripted.script = ['ACTION_ASK'];
    const client = new LoopwardenClient(target);
    let runs = 0;
    try {
      const result = /** @type {any} */ (await guardTool(client, 'r', 'read', async () => { runs += 1; return SAME; },
        { onAsk: async () => false })({ p: 1 }));
      assert.deepStrictEqual([runs, result.details.status], [0, 'blocked']);
    } finally {
      client.close();
    }
    const { approval } = scripted.received[1][1];
    assert.deepStrictEqual([approval.approved, approval.toolCallId, approval.decisionId], [false, '', 'd-1']);
  });
});

describe('inspection and exemptions', () => {
  test('InspectRun\'s tree fields', async () => {
    const client = new LoopwardenClient(target);
    try {
      const view = await client.inspect('child');
      assert.deepStrictEqual([view.parentRunId, view.children, view.rootRunId, view.depth],
        ['root', ['grandchild-1', 'grandchild-2'], 'root', 1]);
      assert.deepStrictEqual(view.treeTotals,
        { toolCalls: 31, toolMs: 1500, inputTokens: 900, outputTokens: 100, costUsd: 0.25, wallSeconds: 12.5, runs: 4 });
      assert.deepStrictEqual([view.runTotals.toolCalls, view.runTotals.runs], [8, 1]);
      assert.deepStrictEqual(view.exemptions, [EXEMPTION]);
    } finally {
      client.close();
    }
  });

  test('listExemptions filters, revokeExemption returns the revoked one or throws ExemptionNotFound', async () => {
    const client = new LoopwardenClient(target);
    try {
      assert.deepStrictEqual(await client.listExemptions({ toolName: 'read' }), [EXEMPTION]);
      assert.deepStrictEqual([scripted.listed.agentId, scripted.listed.toolName], ['', 'read']);
      assert.deepStrictEqual(await client.revokeExemption('ex-1'), EXEMPTION);
      await assert.rejects(client.revokeExemption('ex-404'), ExemptionNotFound);
    } finally {
      client.close();
    }
  });
});
