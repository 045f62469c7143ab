// @ts-check
// Loads tests/conformance/scenarios/*.json and expands them by the rules of
// tests/conformance/README.md, the same way tests/conformance/scenarios.py does.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const SCENARIO_DIR = process.env.LOOPWARDEN_SCENARIO_DIR
  ?? fileURLToPath(new URL('../../../../tests/conformance/scenarios', import.meta.url));

/** @typedef {{ scenario: string, name: string, id: string, config: object, configKey: string, steps: any[] }} Variant */

/** Object keys sorted at every level: one key per distinct config. @param {unknown} value @returns {string} */
export function stableStringify(value) {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value).sort()
      .map((k) => `${JSON.stringify(k)}:${stableStringify(/** @type {any} */ (value)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** @returns {Variant[]} */
export function loadVariants() {
  const variants = [];
  // Sorted by code unit like Python's sorted(glob): ASCII file names sort the same.
  for (const file of fs.readdirSync(SCENARIO_DIR).filter((f) => f.endsWith('.json')).sort()) {
    const scenario = JSON.parse(fs.readFileSync(path.join(SCENARIO_DIR, file), 'utf8'));
    for (const variant of scenario.variants) {
      variants.push({
        scenario: scenario.name, name: variant.name, id: `${scenario.name}/${variant.name}`,
        config: scenario.config, configKey: stableStringify(scenario.config), steps: variant.steps,
      });
    }
  }
  return variants;
}

/** Replace `{i}` in every string value (not in keys). @param {any} value @param {number} i @returns {any} */
function fill(value, i) {
  if (typeof value === 'string') return value.replaceAll('{i}', String(i));
  if (Array.isArray(value)) return value.map((item) => fill(item, i));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, i)]));
  }
  return value;
}

const KINDS = /** @type {const} */ (['tool_call', 'tool_outcome', 'compaction_retry', 'user_turn', 'run_end', 'usage', 'approval']);
/** Approval.scope by the data's spelling. */
const APPROVAL_SCOPES = /** @type {Record<string, string>} */ ({ once: 'APPROVAL_SCOPE_ONCE', always: 'APPROVAL_SCOPE_ALWAYS' });
const CAMEL = {
  tool_call: 'toolCall', tool_outcome: 'toolOutcome', compaction_retry: 'compactionRetry', user_turn: 'userTurn', run_end: 'runEnd',
};

/**
 * @typedef {{ seq: number, runId: string, expect: any, message: any }} ConcreteEvent
 * `message` is the proto Event in @grpc/proto-loader's camelCase shape.
 */

/** @param {Variant} variant @returns {Generator<ConcreteEvent>} */
export function* expand(variant) {
  let seq = 0;
  for (const step of variant.steps) {
    assert.equal(step.events.length, step.expect.length, `${variant.id}: events and expect differ in length`);
    for (let i = 1; i <= (step.repeat ?? 1); i++) {
      for (const [index, raw] of step.events.entries()) {
        const event = fill(raw, i);
        seq += 1;
        const kind = KINDS.find((k) => k in event);
        const body = (kind && event[kind]) || {};
        let paramsJson = body.params_json;
        if (paramsJson === undefined || paramsJson === null) {
          paramsJson = 'params' in body ? JSON.stringify(body.params) : '';
        }
        let resultJson = body.result_json;
        if ((resultJson === undefined || resultJson === null) && 'result' in body) resultJson = JSON.stringify(body.result);
        const prefixed = (/** @type {string} */ id) => (id.trim() ? `${variant.id}/${id}` : id);
        const runId = prefixed(event.run_id);
        /** @type {Record<string, any>} */
        const message = {
          runId, agentId: event.agent_id ?? '', seq, parentRunId: prefixed(event.parent_run_id ?? ''),
          acceptsAsk: event.accepts_ask ?? false,
        };
        if (kind === 'tool_call') {
          message.toolCall = { toolName: body.tool_name ?? '', toolCallId: body.tool_call_id ?? '', paramsJson };
        } else if (kind === 'tool_outcome') {
          /** @type {Record<string, any>} */
          const outcome = {
            toolName: body.tool_name ?? '', toolCallId: body.tool_call_id ?? '', paramsJson, durationMs: body.duration_ms ?? 0,
          };
          if (body.error !== undefined && body.error !== null) outcome.error = body.error;
          else if (resultJson !== undefined && resultJson !== null) outcome.resultJson = resultJson;
          message.toolOutcome = outcome;
        } else if (kind === 'user_turn') {
          message.userTurn = { promptId: body.prompt_id ?? '' };
        } else if (kind === 'usage') {
          message.usage = {
            inputTokens: body.input_tokens ?? 0, outputTokens: body.output_tokens ?? 0, costUsd: body.cost_usd ?? 0,
            model: body.model ?? '',
          };
        } else if (kind === 'approval') {
          message.approval = {
            toolCallId: body.tool_call_id ?? '', decisionId: body.decision_id ?? '', approved: body.approved ?? false,
            scope: APPROVAL_SCOPES[body.scope ?? 'once'], ttlSeconds: body.ttl_seconds ?? 0,
          };
        } else if (kind) {
          message[CAMEL[kind]] = {};
        }
        yield { seq, runId, expect: step.expect[index], message };
      }
    }
  }
}

/**
 * A client verdict (lower-case names) in the proto-name shape the expectations use.
 * @param {import('../../src/index.js').Verdict} v
 */
export function protoNames(v) {
  const upper = (/** @type {string} */ prefix, /** @type {string} */ s) => prefix + (s ? s.toUpperCase() : 'UNSPECIFIED');
  return {
    seq: v.seq, run_id: v.runId, action: upper('ACTION_', v.action), detector: upper('DETECTOR_', v.detector),
    level: upper('LEVEL_', v.level), count: v.count, message: v.message, warning_key: v.warningKey,
    announce: v.announce, paired_tool_name: v.pairedToolName, error_code: v.errorCode, tool_name: v.toolName,
  };
}

/** The level word every WARN / BLOCK / ABORT message starts with, whatever the expectation. */
const LEVEL_WORDS = /** @type {Record<string, string>} */ ({ ACTION_WARN: 'WARNING:', ACTION_BLOCK: 'CRITICAL:', ACTION_ABORT: 'CRITICAL:' });

/**
 * Assert a verdict (proto names) meets an expectation; the same rules as scenarios.py `check`.
 * @param {Record<string, any> | null} expect @param {Record<string, any>} verdict @param {string} where
 */
export function check(expect, verdict, where) {
  const levelWord = LEVEL_WORDS[verdict.action];
  if (levelWord !== undefined) {
    assert.ok(verdict.message.startsWith(levelWord),
      `${where}: a ${verdict.action} message must start with ${levelWord}: ${JSON.stringify(verdict.message)}`);
  }
  if (expect === null || expect === undefined) return;
  for (const [key, wanted] of Object.entries(expect)) {
    if (key === 'action_in') {
      assert.ok(wanted.includes(verdict.action), `${where}: action ${verdict.action} not in ${JSON.stringify(wanted)}`);
    } else if (key === 'message_contains') {
      for (const phrase of typeof wanted === 'string' ? [wanted] : wanted) {
        assert.ok(verdict.message.includes(phrase), `${where}: ${JSON.stringify(phrase)} not in message ${JSON.stringify(verdict.message)}`);
      }
    } else {
      assert.ok(key in verdict, `${where}: unknown expectation key ${key}`);
      assert.deepStrictEqual(verdict[key], wanted, `${where}: ${key} expected ${JSON.stringify(wanted)}, got ${JSON.stringify(verdict[key])} (${JSON.stringify(verdict)})`);
    }
  }
  if (expect.action === 'ACTION_ALLOW' && !('detector' in expect)) {
    assert.equal(verdict.detector, 'DETECTOR_UNSPECIFIED', `${where}: plain allow with a detector: ${JSON.stringify(verdict)}`);
  }
}
