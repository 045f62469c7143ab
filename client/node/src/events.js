// @ts-check
/** Builders of the Event messages, in @grpc/proto-loader's camelCase shape. */

/** @import { EventOptions, OutcomeOptions } from './types.js' */

/** @param {unknown} params @param {string | undefined} paramsJson */
function paramsText(params, paramsJson) {
  if (paramsJson !== undefined) return paramsJson;
  return params === undefined || params === null ? '' : JSON.stringify(params);
}

/** @param {string} runId @param {EventOptions} opts */
function envelope(runId, opts) {
  return { runId, agentId: opts.agentId ?? '', sessionId: opts.sessionId ?? '', seq: opts.seq ?? 0 };
}

/**
 * Before a tool runs.
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {EventOptions} [opts]
 */
export function toolCallEvent(runId, toolName, params, opts = {}) {
  return {
    ...envelope(runId, opts),
    toolCall: { toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson) },
  };
}

/**
 * After a tool ran: `result` (any JSON-able value), `resultJson` (verbatim) or the `error` text.
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {OutcomeOptions} [opts]
 */
export function toolOutcomeEvent(runId, toolName, params, opts = {}) {
  /** @type {Record<string, unknown>} */
  const outcome = { toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson) };
  if (opts.error !== undefined && opts.error !== null) outcome.error = opts.error;
  else if (opts.resultJson !== undefined) outcome.resultJson = opts.resultJson;
  else if ('result' in opts) outcome.resultJson = JSON.stringify(opts.result ?? null);
  return { ...envelope(runId, opts), toolOutcome: outcome };
}

/** @param {string} runId @param {EventOptions} [opts] */
export function compactionRetryEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), compactionRetry: {} };
}

/** @param {string} runId @param {EventOptions} [opts] */
export function runEndEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), runEnd: {} };
}
