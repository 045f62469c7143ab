// @ts-check
/**
 * OpenClaw's hook payloads -> loopwarden's vocabulary: which run an event belongs to, which call
 * an outcome answers, and what of a tool result the daemon needs to hash.
 */

/**
 * @typedef {{ runId?: string, sessionKey?: string, sessionId?: string }} RunScope
 */

/** @param {unknown} value */
function text(value) {
  return typeof value === 'string' ? value.trim() : '';
}

/**
 * The loopwarden run of a hook call. OpenClaw's own detector keeps history per run when a run id
 * is available ("fresh runs do not inherit stale loop counts"), so the run id comes first; tool
 * calls outside an agent run (a gateway tool invocation) fall back to the session, so repeats
 * there are still seen. '' when OpenClaw gave nothing to key on.
 * @param {RunScope} ctx
 * @param {{ runId?: string }} [event]
 */
export function runIdOf(ctx, event) {
  const runId = text(ctx.runId) || text(event?.runId);
  if (runId) return runId;
  const session = text(ctx.sessionKey) || text(ctx.sessionId);
  return session ? `session:${session}` : '';
}

/** The session named in loopwarden's logs and InspectRun. @param {RunScope} ctx */
export function sessionOf(ctx) {
  return text(ctx.sessionKey) || text(ctx.sessionId);
}

/**
 * Identifies one tool call of a run across before_tool_call and after_tool_call.
 * @param {string} runId @param {string} toolName @param {string | undefined} toolCallId
 * @param {unknown} params
 */
export function callKey(runId, toolName, toolCallId, params) {
  if (toolCallId) return `${runId}\u0000${toolCallId}`;
  return `${runId}\u0000${toolName}\u0000${JSON.stringify(params ?? {})}`;
}

/**
 * A tool result as the daemon should see it. OpenClaw results are `{content, details}` and the
 * daemon hashes the text entries of `content` plus `details` (spec section 4), so image bytes are
 * dropped here: they cost the wire and never change the hash. A warning note this plugin appended
 * is removed, so the note itself never looks like progress.
 * @param {unknown} result
 * @param {string} [note] the text this plugin appended to the result, if any
 */
export function resultForDaemon(result, note) {
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return result;
  const record = /** @type {Record<string, unknown>} */ (result);
  if (!Array.isArray(record.content)) return result;
  /** @type {unknown[]} */
  let content = record.content.map((entry) => {
    const block = /** @type {Record<string, unknown>} */ (entry);
    if (block && block.type === 'image' && 'data' in block) {
      const { data: _data, ...rest } = block;
      return rest;
    }
    return entry;
  });
  if (note !== undefined) {
    const at = content.findLastIndex((entry) => {
      const block = /** @type {Record<string, unknown>} */ (entry);
      return block?.type === 'text' && block.text === note;
    });
    if (at >= 0) content = [...content.slice(0, at), ...content.slice(at + 1)];
  }
  return { ...record, content };
}

/**
 * The outcome of an after_tool_call event: the error text when the tool failed, else its result.
 * @param {{ result?: unknown, error?: string }} event
 * @param {string} [note]
 * @returns {{ error: string } | { result: unknown } | {}}
 */
export function outcomeOf(event, note) {
  if (typeof event.error === 'string' && event.error !== '') return { error: event.error };
  if (event.result === undefined) return {};
  return { result: resultForDaemon(event.result, note) };
}

/**
 * A tool result with one more text entry: how a warning reaches the model, the same way
 * OpenClaw's built-in detector appends its note to the affected result.
 * @template {{ content: unknown[] }} R
 * @param {R} result @param {string} note
 * @returns {R}
 */
export function withNote(result, note) {
  return { ...result, content: [...result.content, { type: 'text', text: note }] };
}
