// @ts-check
/** guardTool: wrap a tool so every call asks loopwarden first, with the Python ToolGuard's semantics. */

/**
 * @import { LoopwardenClient } from './client.js'
 * @import { GuardOptions, Verdict } from './types.js'
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

/**
 * Wrap an async tool so it asks loopwarden first and reports its outcome after: the same
 * semantics as the Python ToolGuard. BLOCK returns `blockedToolResult` instead of running (and
 * reports it as the outcome), ABORT throws RunAborted, WARN calls `onWarning` and runs the tool.
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
  const ids = { toolCallId: options.toolCallId, agentId: options.agentId };
  return async (params = /** @type {P} */ ({})) => {
    let verdict;
    try {
      verdict = await client.toolCall(runId, toolName, params, ids);
    } catch (err) {
      if (!(err instanceof LoopwardenUnavailable) || !failOpen) throw err;
      console.warn(`loopwarden unavailable, running ${toolName} unguarded: ${err.message}`);
      return fn(params);
    }
    if (verdict.action === 'abort') throw new RunAborted(verdict);
    if (verdict.action === 'block') {
      const blocked = blockedToolResult(verdict);
      await client.toolOutcome(runId, toolName, params, { ...ids, result: blocked });
      return blocked;
    }
    if (verdict.action === 'warn') onWarning(verdict);
    let result;
    try {
      result = await fn(params);
    } catch (err) {
      const e = /** @type {any} */ (err);
      await client.toolOutcome(runId, toolName, params, { ...ids, error: `${e?.name ?? 'Error'}: ${e?.message ?? e}` });
      throw err;
    }
    const after = await client.toolOutcome(runId, toolName, params, { ...ids, result });
    if (after.action === 'abort') throw new RunAborted(after);
    return result;
  };
}
