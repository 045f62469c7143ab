// @ts-check
// Guardrail spans in the OpenTelemetry GenAI conventions (src/tracing.js) against the real daemon,
// kept by the SDK's in-memory exporter: the Python client's test (tests/e2e/test_tracing_genai.py) in Node.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { context, propagation, SpanKind } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

import {
  GUARDRAIL_RESULT_EVENT, GUARDRAIL_SPAN, LoopwardenClient, OPT_IN_VARIABLE, guardTool, optedIn,
} from '../src/index.js';
import { serverAttributes } from '../src/tracing.js';
import { startDaemon } from './support/daemon.js';

/** @type {import('./support/daemon.js').Daemon} */
let daemon;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const SAME = { content: [{ type: 'text', text: 'same' }] };

before(async () => {
  // What NodeTracerProvider.register() does: spans nest through async calls, trace context propagates.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  daemon = await startDaemon({ tools: { loopDetection: { enabled: true } } });
});

after(async () => {
  await daemon?.stop();
});

/** @param {LoopwardenClient} client @param {string} runId */
async function guardedLoop(client, runId) {
  /** @type {any[]} */
  const results = [];
  for (let i = 1; i <= 21; i++) {
    const read = guardTool(client, runId, 'read', async () => SAME, { toolCallId: `call-${i}`, agentId: 'node-agent' });
    results.push(await read({ path: '/x' }));
  }
  return results;
}

/** @param {any} span */
const spanId = (span) => span.spanContext().spanId;
/** @param {any} span */
const parentId = (span) => span.parentSpanContext?.spanId;

describe('guardrail spans (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental)', () => {
  test('a loop: execute_tool spans holding apply_guardrail CLIENT spans, WARN from the 11th, BLOCK at the 21st', async () => {
    process.env[OPT_IN_VARIABLE] = 'gen_ai_latest_experimental';
    exporter.reset();
    const client = new LoopwardenClient(daemon.grpcTarget, { tracerProvider: provider });
    try {
      const results = await guardedLoop(client, 'tracing/loop');
      assert.equal(results[20].details.status, 'blocked');
    } finally {
      client.close();
      delete process.env[OPT_IN_VARIABLE];
    }
    const spans = exporter.getFinishedSpans();
    const tools = spans.filter((s) => s.name === 'execute_tool read');
    assert.deepStrictEqual(tools.map((s) => s.attributes['gen_ai.tool.call.id']),
      Array.from({ length: 21 }, (_, i) => `call-${i + 1}`));
    assert.ok(tools.every((s) => s.kind === SpanKind.INTERNAL && s.attributes['gen_ai.operation.name'] === 'execute_tool'));
    /** @type {any[]} */
    const calls = [];
    for (const tool of tools) {
      const children = spans.filter((s) => parentId(s) === spanId(tool));
      assert.deepStrictEqual(children.map((s) => [s.name, s.kind, s.attributes['gen_ai.guardrail.source']]),
        [[GUARDRAIL_SPAN, SpanKind.CLIENT, 'tool_call'], [GUARDRAIL_SPAN, SpanKind.CLIENT, 'tool_outcome']]);
      calls.push(children[0]);
    }
    assert.deepStrictEqual(calls.map((s) => s.attributes['gen_ai.guardrail.result.value']),
      [...Array(10).fill('allow'), ...Array(10).fill('warn'), 'block']);
    const last = calls[20];
    assert.deepStrictEqual(
      [last.attributes['gen_ai.operation.name'], last.attributes['gen_ai.provider.name'],
        last.attributes['gen_ai.conversation.id'], last.attributes['gen_ai.tool.name'],
        last.attributes['gen_ai.guardrail.policy.id'], last.attributes['server.address']],
      ['apply_guardrail', 'loopwarden', 'tracing/loop', 'read', 'node-agent', '127.0.0.1']);
    const reported = calls.flatMap((s, i) => s.events.filter((/** @type {any} */ e) => e.name === GUARDRAIL_RESULT_EVENT)
      .map((/** @type {any} */ e) => [i + 1, e.attributes]));
    assert.deepStrictEqual(reported.map(([n]) => n), [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]);
    const [, block] = reported[10];
    assert.ok(block['loopwarden.decision_id']);
    assert.deepStrictEqual({ ...block, 'loopwarden.decision_id': '', 'loopwarden.seq': 0 }, {
      'gen_ai.guardrail.component.name': 'loopwarden', 'gen_ai.provider.name': 'loopwarden',
      'gen_ai.guardrail.result.type': 'action', 'gen_ai.guardrail.result.value': 'block',
      'gen_ai.guardrail.policy.rule.id': 'generic_repeat', 'gen_ai.guardrail.policy.id': 'node-agent',
      'gen_ai.guardrail.source': 'tool_call', 'gen_ai.tool.name': 'read', 'gen_ai.tool.call.id': 'call-21',
      'gen_ai.conversation.id': 'tracing/loop', 'loopwarden.decision_id': '', 'loopwarden.seq': 0,
      'loopwarden.count': 20,
    });
  });

  test('a request carries its span as traceparent', async () => {
    process.env[OPT_IN_VARIABLE] = 'gen_ai_latest_experimental';
    const client = new LoopwardenClient(daemon.grpcTarget, { tracerProvider: provider });
    delete process.env[OPT_IN_VARIABLE];
    exporter.reset();
    /** @type {Record<string, string>} */
    let sent = {};
    const verdict = /** @type {any} */ ({ action: 'allow', runId: 'r', seq: 1, count: 0, detector: '', errorCode: '', decisionId: '' });
    await client.tracing?.request([{ runId: 'r', runEnd: {} }], async (headers) => { sent = headers; return [verdict]; });
    client.close();
    const [span] = exporter.getFinishedSpans();
    assert.equal(sent.traceparent, `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
  });

  test('without the opt-in the client adds no span', async () => {
    delete process.env[OPT_IN_VARIABLE];
    exporter.reset();
    const client = new LoopwardenClient(daemon.grpcTarget, { tracerProvider: provider });
    try {
      assert.equal(client.tracing, null);
      const results = await guardedLoop(client, 'tracing/no-opt-in');
      assert.equal(results[20].details.status, 'blocked');
    } finally {
      client.close();
    }
    assert.deepStrictEqual(exporter.getFinishedSpans(), []);
  });

  test('the opt-in is one item of a comma-separated list; the server comes from the target', () => {
    assert.deepStrictEqual(['gen_ai_latest_experimental', 'http, GEN_AI_LATEST_EXPERIMENTAL', '', 'gen_ai']
      .map((v) => optedIn({ [OPT_IN_VARIABLE]: v })), [true, true, false, false]);
    assert.deepStrictEqual(serverAttributes('[::1]:50051'), { 'server.address': '::1', 'server.port': 50051 });
    assert.deepStrictEqual(serverAttributes('dns:///lw.svc:7'), { 'server.address': 'lw.svc', 'server.port': 7 });
  });
});
