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

/** @param {any} message @returns {Verdict} */
export function verdictFromMessage(message) {
  return {
    seq: Number(message.seq),
    runId: message.runId,
    action: /** @type {Action} */ (shortName(message.action, 'ACTION_')),
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
    shadowAction: message.shadow ? /** @type {Action} */ (shortName(message.shadowAction, 'ACTION_')) : '',
  };
}

/** ALLOW or WARN: the tool call may go ahead. @param {Verdict} verdict */
export function mayRun(verdict) {
  return verdict.action === 'allow' || verdict.action === 'warn';
}
