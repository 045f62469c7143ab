// @ts-check
/** guardTool: wrap a tool so every call asks loopwarden first, with the Python ToolGuard's semantics. */

/**
 * @import { LoopwardenClient } from './client.js'
 * @import { AskAnswer, GuardOptions, Verdict } from './types.js'
 */
import { LoopwardenUnavailable, RunAborted } from './errors.js';

/**
 * What the model sees instead of running a blocked call (spec section 6).
 * @param {Verdict} verdict
 */
export function blockedToolResult(verdict) {
  return {
    content: [{ type: 'text', text: verdict.message }],
    details: { status: 'blocked', deniedReason: 'tool-loop', detector: verdict.detector, count: verdict.count },
  };
}

/** @param {Verdict} verdict */
function logWarning(verdict) {
  if (verdict.announce) console.warn(`loopwarden: ${verdict.message}`);
}

/** An onAsk answer as [approved, scope]; a TypeError for anything else. @param {AskAnswer} answer */
function askAnswer(answer) {
  if (answer === true || answer === 'once') return /** @type {const} */ ([true, 'once']);
  if (answer === 'always') return /** @type {const} */ ([true, 'always']);
  if (answer === false || answer === null || answer === undefined) return /** @type {const} */ ([false, 'once']);
  throw new TypeError(`onAsk must answer true, 'once', 'always', false or null, got ${JSON.stringify(answer)}`);
}

/**
 * Wrap an async tool so it asks loopwarden first and reports its outcome after: the same
 * semantics as the Python ToolGuard. BLOCK returns `blockedToolResult` instead of running (and
 * reports it as the outcome), ABORT throws RunAborted, WARN calls `onWarning` and runs the tool.
 * With `onAsk` the guard can hold a call for a human: an 'ask' calls it, the answer is reported as
 * an approval, and the tool runs only if approved (an 'ask' without a handler is a BLOCK). With
 * `parentRunId` the run is a child run (a sub-agent) of that run. Outcomes carry how long the tool
 * ran (durationMs).
 *
 * @template {Record<string, unknown>} P
 * @template R
 * @param {LoopwardenClient} client
 * @param {string} runId
 * @param {string} toolName
 * @param {(params: P) => Promise<R> | R} fn
 * @param {GuardOptions} [options]
 * @returns {(params?: P) => Promise<R | ReturnType<typeof blockedToolResult>>}
 */
export function guardTool(client, runId, toolName, fn, options = {}) {
  const onWarning = options.onWarning ?? logWarning;
  const failOpen = options.failOpen ?? true;
  const onAsk = options.onAsk;
  const ids = {
    toolCallId: options.toolCallId, agentId: options.agentId, parentRunId: options.parentRunId,
    rootRunId: options.rootRunId, acceptsAsk: onAsk !== undefined,
  };
  /** @param {P} params */
  const guarded = async (params) => {
    /** @type {Verdict} */
    let verdict;
    try {
      verdict = await client.toolCall(runId, toolName, params, ids);
    } catch (err) {
      if (!(err instanceof LoopwardenUnavailable) || !failOpen) throw err;
      console.warn(`loopwarden unavailable, running ${toolName} unguarded: ${err.message}`);
      return fn(params);
    }
    if (verdict.action === 'ask' && onAsk && (ids.toolCallId || verdict.decisionId)) {
      const [approved, scope] = askAnswer(await onAsk(verdict));
      const answered = await client.approval(runId, {
        ...ids, approved, scope, decisionId: ids.toolCallId ? '' : verdict.decisionId,
      });
      if (answered.action === 'abort') throw new RunAborted(answered);
      if (approved) verdict = { ...verdict, action: /** @type {const} */ ('allow') };
    }
    if (verdict.action === 'abort') throw new RunAborted(verdict);
    if (verdict.action === 'block' || verdict.action === 'ask') {
      const blocked = blockedToolResult(verdict);
      await client.toolOutcome(runId, toolName, params, { ...ids, result: blocked });
      return blocked;
    }
    if (verdict.action === 'warn') onWarning(verdict);
    let result;
    const started = performance.now();
    const elapsed = () => Math.max(0, Math.round(performance.now() - started));
    try {
      result = await fn(params);
    } catch (err) {
      const e = /** @type {any} */ (err);
      await client.toolOutcome(runId, toolName, params,
        { ...ids, error: `${e?.name ?? 'Error'}: ${e?.message ?? e}`, durationMs: elapsed() });
      throw err;
    }
    const after = await client.toolOutcome(runId, toolName, params, { ...ids, result, durationMs: elapsed() });
    if (after.action === 'abort') throw new RunAborted(after);
    return result;
  };
  // With the GenAI tracing opt-in, each call is an execute_tool span holding its guardrail spans.
  return (params = /** @type {P} */ ({})) => (client.tracing
    ? client.tracing.executeTool(toolName, ids.toolCallId ?? '', runId, () => guarded(params))
    : guarded(params));
}
