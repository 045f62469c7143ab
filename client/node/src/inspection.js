// @ts-check
/** The InspectRun response as a plain object: the read-only view of one run. */

/** @import { RunInspection } from './types.js' */

/** @param {any} message @returns {RunInspection} */
export function inspectionFromMessage(message) {
  return {
    runId: message.runId,
    agentId: message.agentId,
    records: message.records.map((/** @type {any} */ r) => ({
      seq: Number(r.seq), toolName: r.toolName, argsHash: r.argsHash, toolCallId: r.toolCallId,
      resultHash: r.resultHash, unknownToolName: r.unknownToolName,
    })),
    guardArmed: message.guard?.armed ?? false,
    guardWindowSize: message.guard?.windowSize ?? 0,
    guardObserved: message.guard?.observed ?? 0,
    blocks: message.blocks,
    aborted: message.aborted,
    abortErrorCode: message.abortErrorCode,
    effectiveConfig: { ...(message.effectiveConfig ?? {}) },
    eventsEvaluated: Number(message.eventsEvaluated),
  };
}
