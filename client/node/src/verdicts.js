// @ts-check
/**
 * Verdict messages as plain objects with lower-case names, the same shape as the Python client's
 * `Verdict`: callers never see protobuf objects.
 */

/** @import { Action, Verdict } from './types.js' */

/** 'DETECTOR_PING_PONG' -> 'ping_pong'; any *_UNSPECIFIED -> ''. @param {string} name @param {string} prefix */
function shortName(name, prefix) {
  const short = String(name).replace(prefix, '').toLowerCase();
  return short === 'unspecified' ? '' : short;
}

/** The actions this client knows, by their short name. */
const ACTIONS = new Set(['allow', 'warn', 'block', 'abort', 'reject', 'ask']);

/**
 * A wire action as the client's Action. One this client does not know (a newer daemon's; it
 * reaches us as a number or an unknown name) is 'block': not running the call is the safe reading,
 * and a runner never crashes on it.
 * @param {unknown} name @returns {Action}
 */
function actionOf(name) {
  const short = shortName(String(name), 'ACTION_');
  return /** @type {Action} */ (ACTIONS.has(short) ? short : 'block');
}

/** @param {any} message @returns {Verdict} */
export function verdictFromMessage(message) {
  return {
    seq: Number(message.seq),
    runId: message.runId,
    action: actionOf(message.action),
    detector: shortName(message.detector, 'DETECTOR_'),
    level: shortName(message.level, 'LEVEL_'),
    count: message.count,
    message: message.message,
    warningKey: message.warningKey,
    announce: message.announce,
    pairedToolName: message.pairedToolName,
    errorCode: message.errorCode,
    toolName: message.toolName,
    decisionId: message.decisionId ?? '',
    evidenceSeqs: (message.evidence?.seqs ?? []).map(Number),
    evidenceCallIds: [...(message.evidence?.toolCallIds ?? [])],
    loopStartedSeq: Number(message.evidence?.loopStartedSeq ?? 0),
    shadow: Boolean(message.shadow),
    shadowAction: message.shadow ? actionOf(message.shadowAction) : '',
  };
}

/** ALLOW or WARN: the tool call may go ahead (an ASK may not until a human approves). @param {Verdict} verdict */
export function mayRun(verdict) {
  return verdict.action === 'allow' || verdict.action === 'warn';
}
