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
 * The loopwarden run of a hook call: the OpenClaw session (its `sessionId`, one incarnation of a
 * conversation, which OpenClaw ends with session_end on /new, a reset or expiry), so that a
 * sub-agent's session can be a child run of its parent's and a session's budgets span its turns.
 * Each OpenClaw run inside it (one user message, heartbeat or cron prompt) is a `user_turn` of
 * that run (turnOf), which starts detection fresh as OpenClaw's own detector does per run. A call
 * with no session id falls back to the session key, then to OpenClaw's run id. '' when OpenClaw
 * gave nothing to key on.
 * @param {RunScope} ctx
 * @param {{ runId?: string }} [event]
 */
export function runIdOf(ctx, event) {
  const sessionId = text(ctx.sessionId);
  if (sessionId) return sessionId;
  const sessionKey = text(ctx.sessionKey);
  if (sessionKey) return `session:${sessionKey}`;
  const runId = text(ctx.runId) || text(event?.runId);
  return runId ? `run:${runId}` : '';
}

/**
 * The OpenClaw run (the turn) a hook call belongs to: a new one in a session is a user turn of
 * the session's loopwarden run. '' outside an agent run.
 * @param {RunScope} ctx
 * @param {{ runId?: string }} [event]
 */
export function turnOf(ctx, event) {
  return text(ctx.runId) || text(event?.runId);
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

/**
 * What an llm_output event (one attempt of an OpenClaw run: its model calls and tool calls, ending
 * on the run's answer) tells the daemon: the attempt's assistant texts joined, the answer the run
 * ends on, and its token usage (prompt tokens with the cached ones, completion tokens). null when
 * it carries neither (OpenClaw may send no text and no usage).
 * @param {{ assistantTexts?: unknown, usage?: { input?: number, output?: number, cacheRead?: number, cacheWrite?: number, total?: number }, model?: string }} event
 * @returns {{ text: string, usage?: { inputTokens: number, outputTokens: number, model: string } } | null}
 */
export function modelOutputOf(event) {
  const texts = Array.isArray(event.assistantTexts) ? event.assistantTexts : [];
  const outputText = texts.filter((part) => typeof part === 'string').join('\n').trim();
  const u = event.usage ?? {};
  /** @param {unknown} value */
  const count = (value) => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : 0);
  let inputTokens = count(u.input) + count(u.cacheRead) + count(u.cacheWrite);
  const outputTokens = count(u.output);
  if (!inputTokens && !outputTokens) inputTokens = count(u.total); // a runtime that reports only the total
  const usage = inputTokens || outputTokens ? { inputTokens, outputTokens, model: text(event.model) } : undefined;
  if (!outputText && !usage) return null;
  return { text: outputText, ...(usage ? { usage } : {}) };
}
