// @ts-check
/**
 * OpenTelemetry spans in the GenAI guardrail conventions, the Python client's loopwarden.tracing in
 * Node: the same conventions (pinned at open-telemetry/semantic-conventions-genai@
 * f5e3733b19bdb5cb9074c2ec26da9e375d52a40a, docs/gen-ai/gen-ai-guardrails.md), the same opt-in
 * (OTEL_SEMCONV_STABILITY_OPT_IN including `gen_ai_latest_experimental`) and the same mapping of a
 * verdict onto them (docs/operations.md, "Traces in the GenAI conventions").
 *
 * `@opentelemetry/api` is an optional peer dependency: loaded when present, and without it (or
 * without the opt-in) the client does nothing more per request. Spans nest under the caller's
 * active span only where a context manager is registered (as NodeTracerProvider does).
 */
import { createRequire } from 'node:module';

export const CONVENTIONS_COMMIT = 'f5e3733b19bdb5cb9074c2ec26da9e375d52a40a';
export const OPT_IN_VARIABLE = 'OTEL_SEMCONV_STABILITY_OPT_IN';
export const OPT_IN_VALUE = 'gen_ai_latest_experimental';
export const GUARDRAIL_RESULT_EVENT = 'gen_ai.guardrail.result';
const COMPONENT = 'loopwarden';
export const GUARDRAIL_SPAN = `apply_guardrail ${COMPONENT}`;
const SCOPE = 'loopwarden.client';
const KINDS = ['toolCall', 'toolOutcome', 'compactionRetry', 'runEnd', 'userTurn', 'usage', 'approval'];
/** The contract's spelling of each kind (gen_ai.guardrail.source), as the daemon names it. */
const KIND_NAMES = {
  toolCall: 'tool_call', toolOutcome: 'tool_outcome', compactionRetry: 'compaction_retry', runEnd: 'run_end',
  userTurn: 'user_turn', usage: 'usage', approval: 'approval',
};

/** OTEL_SEMCONV_STABILITY_OPT_IN names gen_ai_latest_experimental. @param {Record<string, string | undefined>} [env] */
export function optedIn(env = process.env) {
  return (env[OPT_IN_VARIABLE] ?? '').split(',').some((item) => item.trim().toLowerCase() === OPT_IN_VALUE);
}

/** @returns {any} the @opentelemetry/api module, or null when it is not installed */
function otelApi() {
  try {
    return createRequire(import.meta.url)('@opentelemetry/api');
  } catch {
    return null;
  }
}

/** server.address / server.port of a gRPC target. @param {string} target */
export function serverAttributes(target) {
  if (/^unix(-abstract)?:/.test(target)) return { 'server.address': target.slice(target.indexOf(':') + 1) };
  const bare = target.split('///').at(-1) ?? target;
  const match = /^(.*):(\d+)$/.exec(bare);
  if (match && match[1]) return { 'server.address': match[1].replace(/^\[|\]$/g, ''), 'server.port': Number(match[2]) };
  return bare ? { 'server.address': bare } : {};
}

/** @param {any} event @returns {[string, any]} the event's kind (contract spelling) and its body */
function kindOf(event) {
  const key = KINDS.find((k) => event?.[k] !== undefined && event?.[k] !== null);
  return key ? [/** @type {Record<string, string>} */ (KIND_NAMES)[key], event[key]] : ['', undefined];
}

/** @param {Record<string, unknown>} attributes @param {Record<string, unknown>} optional */
function withOptional(attributes, optional) {
  for (const [key, value] of Object.entries(optional)) if (value) attributes[key] = value;
  return attributes;
}

/**
 * A `gen_ai.guardrail.result` event's attributes for one verdict and the event that got it.
 * @param {any} event @param {import('./types.js').Verdict} verdict
 */
export function resultAttributes(event, verdict) {
  const [kind, body] = kindOf(event);
  const attributes = withOptional({
    'gen_ai.guardrail.component.name': COMPONENT, 'gen_ai.provider.name': COMPONENT,
    'gen_ai.guardrail.result.type': 'action', 'gen_ai.guardrail.result.value': verdict.action,
    'gen_ai.conversation.id': verdict.runId || String(event?.runId ?? '').trim(),
  }, {
    'gen_ai.guardrail.policy.rule.id': verdict.detector, 'gen_ai.guardrail.policy.id': event?.agentId,
    'gen_ai.guardrail.source': kind, 'gen_ai.guardrail.result.reason': verdict.errorCode,
    'gen_ai.tool.name': verdict.toolName || body?.toolName, 'gen_ai.tool.call.id': body?.toolCallId,
    'loopwarden.decision_id': verdict.decisionId,
  });
  attributes['loopwarden.seq'] = verdict.seq;
  attributes['loopwarden.count'] = verdict.count;
  if (verdict.shadowAction) attributes['loopwarden.shadow_action'] = verdict.shadowAction;
  return attributes;
}

/** What a request's events share: its run, and for one event its tool, call, source and policy. @param {any[]} events */
function requestAttributes(events) {
  /** @type {Record<string, unknown>} */
  const attributes = {};
  const runs = new Set(events.map((e) => String(e?.runId ?? '').trim()));
  if (runs.size === 1 && !runs.has('')) attributes['gen_ai.conversation.id'] = [...runs][0];
  if (events.length === 1) {
    const [kind, body] = kindOf(events[0]);
    withOptional(attributes, {
      'gen_ai.guardrail.source': kind, 'gen_ai.guardrail.policy.id': events[0]?.agentId,
      'gen_ai.tool.name': body?.toolName, 'gen_ai.tool.call.id': body?.toolCallId,
    });
  }
  return attributes;
}

/**
 * The guardrail spans of one client, or null (no opt-in, or no @opentelemetry/api).
 * @param {string} target @param {any} [tracerProvider] default: the global provider
 * @param {Record<string, string | undefined>} [env]
 */
export function guardrailSpans(target, tracerProvider, env = process.env) {
  if (!optedIn(env)) return null;
  const api = otelApi();
  if (!api) return null;
  const tracer = (tracerProvider ?? api.trace.getTracerProvider()).getTracer(SCOPE);
  return new GuardrailSpans(api, tracer, serverAttributes(target));
}

export class GuardrailSpans {
  /** @param {any} api @param {any} tracer @param {Record<string, unknown>} server */
  constructor(api, tracer, server) {
    /** @private */
    this.api = api;
    /** @private */
    this.tracer = tracer;
    /** @private */
    this.server = server;
  }

  /**
   * The CLIENT span of one Check or Evaluate request: `send(headers)` runs inside it, with the
   * span's trace context as headers (traceparent) for a unary call to carry.
   * @template {import('./types.js').Verdict[]} V
   * @param {any[]} events @param {(headers: Record<string, string>) => Promise<V>} send @returns {Promise<V>}
   */
  request(events, send) {
    const { api } = this;
    const attributes = {
      'gen_ai.operation.name': 'apply_guardrail', 'gen_ai.provider.name': COMPONENT,
      'gen_ai.guardrail.component.name': COMPONENT, ...this.server, ...requestAttributes(events),
    };
    return this.tracer.startActiveSpan(GUARDRAIL_SPAN, { kind: api.SpanKind.CLIENT, attributes },
      async (/** @type {any} */ span) => {
        try {
          /** @type {Record<string, string>} */
          const headers = {};
          api.propagation.inject(api.context.active(), headers);
          const verdicts = await send(headers);
          if (span.isRecording()) answered(span, events, verdicts);
          return verdicts;
        } catch (err) {
          failed(api, span, err);
          throw err;
        } finally {
          span.end();
        }
      });
  }

  /**
   * The `execute_tool {tool}` span (INTERNAL) of a tool a guard runs; its guardrail spans are its children.
   * @template R @param {string} toolName @param {string} toolCallId @param {string} runId
   * @param {() => Promise<R>} run @returns {Promise<R>}
   */
  executeTool(toolName, toolCallId, runId, run) {
    const { api } = this;
    const attributes = withOptional({
      'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': toolName, 'gen_ai.conversation.id': runId,
    }, { 'gen_ai.tool.call.id': toolCallId });
    return this.tracer.startActiveSpan(`execute_tool ${toolName}`, { kind: api.SpanKind.INTERNAL, attributes },
      async (/** @type {any} */ span) => {
        try {
          return await run();
        } catch (err) {
          failed(api, span, err);
          throw err;
        } finally {
          span.end();
        }
      });
  }
}

/** The result on the span for one event; a result event per verdict other than a plain ALLOW. @param {any} span @param {any[]} events @param {import('./types.js').Verdict[]} verdicts */
function answered(span, events, verdicts) {
  if (verdicts.length === 1) {
    span.setAttribute('gen_ai.guardrail.result.type', 'action');
    span.setAttribute('gen_ai.guardrail.result.value', verdicts[0].action);
    if (verdicts[0].errorCode) span.setAttribute('gen_ai.guardrail.result.reason', verdicts[0].errorCode);
  }
  verdicts.forEach((verdict, i) => {
    if (verdict.action !== 'allow' || verdict.decisionId) {
      span.addEvent(GUARDRAIL_RESULT_EVENT, resultAttributes(events[i], verdict));
    }
  });
}

/** @param {any} api @param {any} span @param {unknown} err */
function failed(api, span, err) {
  const e = /** @type {any} */ (err);
  span.setAttribute('error.type', e?.name ?? typeof err);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(e?.message ?? err).slice(0, 200) });
}
