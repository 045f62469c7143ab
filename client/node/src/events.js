// @ts-check
/** Builders of the Event messages, in @grpc/proto-loader's camelCase shape. */

/** @import { ApprovalOptions, EventExtra, EventOptions, ModelOutputOptions, OutcomeOptions, UsageOptions } from './types.js' */

/** @param {unknown} params @param {string | undefined} paramsJson */
function paramsText(params, paramsJson) {
  if (paramsJson !== undefined) return paramsJson;
  return params === undefined || params === null ? '' : JSON.stringify(params);
}

// The fields without an option of their own (EventExtra), by message: each carried as it is.
// generated:event-extra:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
/** Event's generic fields: none yet. */
const envelopeExtra = (/** @type {EventExtra} */ _opts) => ({});
/** ToolCall's generic fields: none yet. */
const toolCallExtra = (/** @type {EventExtra} */ _opts) => ({});
/** ToolOutcome's generic fields: none yet. */
const toolOutcomeExtra = (/** @type {EventExtra} */ _opts) => ({});
/** CompactionRetry's generic fields: none yet. */
const compactionRetryExtra = (/** @type {EventExtra} */ _opts) => ({});
/** RunEnd's generic fields: none yet. */
const runEndExtra = (/** @type {EventExtra} */ _opts) => ({});
/** UserTurn's generic fields: none yet. */
const userTurnExtra = (/** @type {EventExtra} */ _opts) => ({});
/** Usage's generic fields: none yet. */
const usageExtra = (/** @type {EventExtra} */ _opts) => ({});
/** Approval's generic fields: none yet. */
const approvalExtra = (/** @type {EventExtra} */ _opts) => ({});
/** ModelOutput's generic fields: none yet. */
const modelOutputExtra = (/** @type {EventExtra} */ _opts) => ({});
// generated:event-extra:end

/** @param {string} runId @param {EventOptions & EventExtra} opts */
function envelope(runId, opts) {
  return {
    runId, agentId: opts.agentId ?? '', sessionId: opts.sessionId ?? '', seq: opts.seq ?? 0,
    parentRunId: opts.parentRunId ?? '', acceptsAsk: Boolean(opts.acceptsAsk), ...envelopeExtra(opts),
  };
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
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {EventOptions & EventExtra} [opts]
 */
export function toolCallEvent(runId, toolName, params, opts = {}) {
  return {
    ...envelope(runId, opts),
    toolCall: {
      toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson),
      toolClass: toolClass(opts.toolClass), batchId: opts.batchId ?? '', ...toolCallExtra(opts),
    },
  };
}

/**
 * After a tool ran: `result` (any JSON-able value), `resultJson` (verbatim) or the `error` text;
 * `durationMs`: how long it ran (loopwarden.budgets.toolSecondsPerTree).
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {OutcomeOptions} [opts]
 */
export function toolOutcomeEvent(runId, toolName, params, opts = {}) {
  /** @type {Record<string, unknown>} */
  const outcome = {
    toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson),
    durationMs: opts.durationMs ?? 0, ...toolOutcomeExtra(opts),
  };
  if (opts.error !== undefined && opts.error !== null) outcome.error = opts.error;
  else if (opts.resultJson !== undefined) outcome.resultJson = opts.resultJson;
  else if ('result' in opts) outcome.resultJson = JSON.stringify(opts.result ?? null);
  return { ...envelope(runId, opts), toolOutcome: outcome };
}

/** @param {string} runId @param {EventOptions & EventExtra} [opts] */
export function compactionRetryEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), compactionRetry: compactionRetryExtra(opts) };
}

/**
 * A person or an orchestrator sent the run a new instruction: the run starts fresh for loop
 * detection (loopwarden.userTurnResets); an aborted run stays aborted. `promptId` names the prompt.
 * @param {string} runId @param {EventOptions & EventExtra} [opts]
 */
export function userTurnEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), userTurn: { promptId: opts.promptId ?? '', ...userTurnExtra(opts) } };
}

/** @param {string} runId @param {EventOptions & EventExtra} [opts] */
export function runEndEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), runEnd: runEndExtra(opts) };
}

/**
 * What one model response cost, for the tree's token and cost budgets
 * (loopwarden.budgets.tokensPerTree, costUsdPerTree). Counted once per event.
 * @param {string} runId @param {UsageOptions} [opts]
 */
export function usageEvent(runId, opts = {}) {
  return {
    ...envelope(runId, opts),
    usage: {
      inputTokens: opts.inputTokens ?? 0, outputTokens: opts.outputTokens ?? 0, costUsd: opts.costUsd ?? 0,
      model: opts.model ?? '', ...usageExtra(opts),
    },
  };
}

/** ModelOutput.output_kind by its spelling in the client ('' = message). */
const OUTPUT_KINDS = new Map([
  ['', 'OUTPUT_KIND_UNSPECIFIED'], ['message', 'OUTPUT_KIND_MESSAGE'], ['thought', 'OUTPUT_KIND_THOUGHT'],
  ['final_answer', 'OUTPUT_KIND_FINAL_ANSWER'],
]);

/**
 * What the model said: `text` (or, instead, `textDigest`, your own digest of it), its
 * `outputKind` ('message', 'thought', 'final_answer'; a TypeError for another), `stopHookActive`
 * when a stop hook already kept the turn going, and `usage` ({inputTokens, outputTokens, costUsd,
 * model}), when given, spent into the budgets as a usage event is. Its verdict is 'allow', 'warn'
 * or 'abort' (end the run; for a stop hook, end the session).
 * @param {string} runId @param {ModelOutputOptions} opts
 */
export function modelOutputEvent(runId, opts) {
  const outputKind = OUTPUT_KINDS.get(opts.outputKind ?? '');
  if (outputKind === undefined) {
    throw new TypeError(`outputKind must be 'message', 'thought' or 'final_answer', got ${JSON.stringify(opts.outputKind)}`);
  }
  const usage = opts.usage;
  return {
    ...envelope(runId, opts),
    modelOutput: {
      text: opts.text ?? '', textDigest: opts.textDigest ?? '', outputKind,
      stopHookActive: Boolean(opts.stopHookActive), ...modelOutputExtra(opts),
      ...(usage ? {
        usage: {
          inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0, costUsd: usage.costUsd ?? 0,
          model: usage.model ?? '',
        },
      } : {}),
    },
  };
}

/** Approval.scope by its spelling in the client ('' = once). */
const APPROVAL_SCOPES = new Map([
  ['', 'APPROVAL_SCOPE_UNSPECIFIED'], ['once', 'APPROVAL_SCOPE_ONCE'], ['always', 'APPROVAL_SCOPE_ALWAYS'],
]);

/**
 * A human's answer to an ASK verdict, naming the asked call by `toolCallId` or the ASK's
 * `decisionId` (a TypeError without either, or for a scope other than 'once' / 'always').
 * `scope: 'once'`: this call only; `'always'`: a standing exemption for this agent, tool and
 * arguments (`ttlSeconds`, 0: the daemon's default); `approved: false`: later criticals block.
 * @param {string} runId @param {ApprovalOptions} opts
 */
export function approvalEvent(runId, opts) {
  const scope = APPROVAL_SCOPES.get(opts.scope ?? '');
  if (scope === undefined) throw new TypeError(`scope must be 'once' or 'always', got ${JSON.stringify(opts.scope)}`);
  if (!opts.toolCallId && !opts.decisionId) {
    throw new TypeError('an approval names the asked call: pass toolCallId or decisionId');
  }
  if (typeof opts.approved !== 'boolean') {
    throw new TypeError(`approved must be true or false, got ${JSON.stringify(opts.approved)}`);
  }
  return {
    ...envelope(runId, opts),
    approval: {
      toolCallId: opts.toolCallId ?? '', decisionId: opts.decisionId ?? '', approved: opts.approved, scope,
      ttlSeconds: opts.ttlSeconds ?? 0, ...approvalExtra(opts),
    },
  };
}
