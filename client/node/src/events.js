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

/** ToolCall.tool_class by the config's spelling of a class ('' = unspecified). */
const TOOL_CLASSES = new Map([
  ['', 'TOOL_CLASS_UNSPECIFIED'], ['readOnly', 'TOOL_CLASS_READ_ONLY'], ['mutating', 'TOOL_CLASS_MUTATING'],
  ['poll', 'TOOL_CLASS_POLL'],
]);

/** ToolCall.tool_class of a class name; a TypeError for a name that is none. @param {unknown} name */
export function toolClass(name) {
  const wire = TOOL_CLASSES.get(/** @type {string} */ (name ?? ''));
  if (wire === undefined) {
    const known = [...TOOL_CLASSES.keys()].filter(Boolean).map((c) => `'${c}'`).join(', ');
    throw new TypeError(`toolClass must be one of ${known} (or empty), got ${JSON.stringify(name)}`);
  }
  return wire;
}

/**
 * Before a tool runs. `batchId` and `toolClass` (EventOptions) go into the ToolCall; an unknown
 * `toolClass` throws a TypeError naming the classes.
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {EventOptions} [opts]
 */
export function toolCallEvent(runId, toolName, params, opts = {}) {
  return {
    ...envelope(runId, opts),
    toolCall: {
      toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson),
      toolClass: toolClass(opts.toolClass), batchId: opts.batchId ?? '',
    },
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

/**
 * A person or an orchestrator sent the run a new instruction: the run starts fresh for loop
 * detection (loopwarden.userTurnResets); an aborted run stays aborted. `promptId` names the prompt.
 * @param {string} runId @param {EventOptions} [opts]
 */
export function userTurnEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), userTurn: { promptId: opts.promptId ?? '' } };
}

/** @param {string} runId @param {EventOptions} [opts] */
export function runEndEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), runEnd: {} };
}
