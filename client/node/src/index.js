// @ts-check
/**
 * loopwarden client for Node.js: ask before each tool call, report each outcome.
 *
 * This module only re-exports: each name lives in the module that owns its job. Every name here
 * is a promise to callers, and test/types.test.js pins the list, so adding one is a decision.
 */
export * from './types.js';
export * from './tables.js';
export { DEFAULT_PROTO_ROOT, PROTO_PATH, SERVICE_NAME, loadService } from './stub.js';
export { ExemptionNotFound, LoopwardenError, LoopwardenUnavailable, RunAborted, RunNotFound } from './errors.js';
export {
  approvalEvent, compactionRetryEvent, modelOutputEvent, runEndEvent, toolCallEvent, toolOutcomeEvent, usageEvent,
  userTurnEvent,
} from './events.js';
export { mayRun, verdictFromMessage } from './verdicts.js';
export { DEFAULT_TARGET, LoopwardenClient } from './client.js';
export { blockedToolResult, guardTool } from './guard.js';
export {
  CONVENTIONS_COMMIT, GUARDRAIL_RESULT_EVENT, GUARDRAIL_SPAN, OPT_IN_VARIABLE, optedIn,
} from './tracing.js';
