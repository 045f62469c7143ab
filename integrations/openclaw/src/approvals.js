// @ts-check
/**
 * loopwarden's ASK in OpenClaw's words: an ASK verdict becomes the `requireApproval` a
 * before_tool_call handler may answer, and OpenClaw's resolution of it becomes the `approval`
 * event the daemon waits for.
 *
 * OpenClaw (2026.9, agent-tools.before-tool-call) holds the call after the handler has answered,
 * outside the handler's 15 s budget: it shows the title and description to a person (the
 * approval surface of the run's channel, the TUI, the control UI), waits up to `timeoutMs` (its
 * default 120 s, clamped to 600 s), runs the call on allow-once / allow-always, and otherwise
 * hands the model a blocked result. Every outcome, a timeout or an approval that could not be
 * routed included, is reported to `onResolution`.
 */

/** @typedef {import('@loopwarden/client').Verdict} Verdict */
/** @typedef {import('./openclaw.js').BlockResult} BlockResult */
/** @typedef {NonNullable<BlockResult['requireApproval']>} ApprovalRequest */
/** @typedef {Parameters<NonNullable<ApprovalRequest['onResolution']>>[0]} Resolution */

/** OpenClaw's limits on an approval's texts (PLUGIN_APPROVAL_TITLE/DESCRIPTION_MAX_LENGTH). */
export const TITLE_MAX_CHARS = 80;
export const DESCRIPTION_MAX_CHARS = 512;

/** @param {string} text @param {number} max */
function clip(text, max) {
  const chars = Array.from(text);
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join('')}…`;
}

/**
 * The requireApproval for an ASK verdict. The description is the verdict's message (the loop's
 * own reason); the model reads the same message if the call is not run because nobody answered.
 * @param {Verdict} verdict @param {string} toolName @param {number} timeoutMs
 * @param {(resolution: Resolution) => void} onResolution
 * @returns {ApprovalRequest}
 */
export function approvalRequest(verdict, toolName, timeoutMs, onResolution) {
  const seconds = Math.round(timeoutMs / 1000);
  return {
    title: clip(`Loop guard: let ${toolName} run again?`, TITLE_MAX_CHARS),
    description: clip(verdict.message, DESCRIPTION_MAX_CHARS),
    severity: 'critical',
    timeoutMs,
    timeoutReason: `${verdict.message}\nNobody answered within ${seconds} s, so the call did not run. `
      + 'Do not repeat it; change your approach or ask the user.',
    allowedDecisions: ['allow-once', 'allow-always', 'deny'],
    onResolution,
  };
}

/**
 * What an OpenClaw resolution tells the daemon: allow-once and allow-always approve (the latter
 * as a standing exemption); deny, a timeout and a cancelled approval (one OpenClaw could not show,
 * or the run ended while it waited) deny, as OpenClaw itself treats every unresolved approval.
 * @param {Resolution} resolution
 * @returns {{ approved: boolean, scope: 'once' | 'always' }}
 */
export function approvalAnswer(resolution) {
  if (resolution === 'allow-always') return { approved: true, scope: 'always' };
  if (resolution === 'allow-once') return { approved: true, scope: 'once' };
  return { approved: false, scope: 'once' };
}
