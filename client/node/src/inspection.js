// @ts-check
/** The InspectRun response as a plain object: the read-only view of one run. */

/** @import { Exemption, OutputStreaks, RunInspection, RunRecord, Totals } from './types.js' */

/** @param {any} message @returns {Totals} */
function totalsFromMessage(message) {
  return {
    toolCalls: Number(message?.toolCalls ?? 0), toolMs: Number(message?.toolMs ?? 0),
    inputTokens: Number(message?.inputTokens ?? 0), outputTokens: Number(message?.outputTokens ?? 0),
    costUsd: message?.costUsd ?? 0, wallSeconds: message?.wallSeconds ?? 0, runs: message?.runs ?? 0,
  };
}

/** A standing approval as a plain object. @param {any} message @returns {Exemption} */
export function exemptionFromMessage(message) {
  return {
    id: message.id, agentId: message.agentId, toolName: message.toolName, argsHash: message.argsHash,
    createdAt: message.createdAt, expiresAt: message.expiresAt, runId: message.runId,
  };
}

// generated:run-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
/** @param {any} message @returns {RunRecord} */
function runRecordFromMessage(message) {
  return {
    seq: Number(message.seq),
    toolName: message.toolName,
    argsHash: message.argsHash,
    toolCallId: message.toolCallId,
    resultHash: message.resultHash,
    unknownToolName: message.unknownToolName,
  };
}
// generated:run-record:end

/** @param {any} message @returns {RunInspection} */
export function inspectionFromMessage(message) {
  return {
    runId: message.runId,
    agentId: message.agentId,
    records: message.records.map(runRecordFromMessage),
    guardArmed: message.guard?.armed ?? false,
    guardWindowSize: message.guard?.windowSize ?? 0,
    guardObserved: message.guard?.observed ?? 0,
    blocks: message.blocks,
    aborted: message.aborted,
    abortErrorCode: message.abortErrorCode,
    effectiveConfig: { ...(message.effectiveConfig ?? {}) },
    eventsEvaluated: Number(message.eventsEvaluated),
    parentRunId: message.parentRunId ?? '',
    children: [...(message.children ?? [])],
    rootRunId: message.rootRunId ?? '',
    depth: message.depth ?? 0,
    treeTotals: totalsFromMessage(message.treeTotals),
    runTotals: totalsFromMessage(message.runTotals),
    exemptions: (message.exemptions ?? []).map(exemptionFromMessage),
    outputStreaks: outputStreaksFromMessage(message.outputStreaks),
  };
}

/** @param {any} message @returns {OutputStreaks} */
function outputStreaksFromMessage(message) {
  return {
    messages: message?.messages ?? 0,
    thoughts: message?.thoughts ?? 0,
    finalAnswers: message?.finalAnswers ?? 0,
    compactions: message?.compactions ?? 0,
    stopContinuations: message?.stopContinuations ?? 0,
    finalAnswerTurns: message?.finalAnswerTurns ?? 0,
  };
}
