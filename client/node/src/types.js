// @ts-check
/**
 * The shapes callers see: JSDoc types only, no code. One module so index.js can re-export them
 * all with one `export *`, and so the types build can name each exactly once.
 */
export {};

/**
 * @typedef {object} EventOptions
 * @property {string} [agentId]
 * @property {string} [sessionId]
 * @property {number} [seq]
 * @property {string} [toolCallId]
 * @property {string} [paramsJson] sent verbatim instead of JSON.stringify(params)
 * @property {string} [batchId] tool calls: the calls of a run sharing a batch id were issued
 *   together (one model turn's parallel calls, at most 64). With loopwarden.parallelBatches,
 *   identical calls of a batch count once and a fan-out of distinct calls is not churn; without
 *   one, the calls of one `evaluate` request are a batch
 * @property {'' | 'readOnly' | 'mutating' | 'poll'} [toolClass] tool calls: what the tool does, as
 *   the config spells a class ('' = not said; loopwarden.toolRules in the config wins)
 * @property {string} [promptId] user turns: the host's id of the new prompt (UserTurn.prompt_id)
 */

/**
 * @typedef {EventOptions & { result?: unknown, resultJson?: string, error?: string }} OutcomeOptions
 */

/**
 * @typedef {'allow' | 'warn' | 'block' | 'abort' | 'reject'} Action
 */

/**
 * @typedef {object} Verdict
 * @property {number} seq
 * @property {string} runId
 * @property {Action} action
 * @property {string} detector "generic_repeat", "ping_pong", … ("" for a plain allow)
 * @property {string} level "warning" or "critical" when a detector matched
 * @property {number} count
 * @property {string} message
 * @property {string} warningKey
 * @property {boolean} announce
 * @property {string} pairedToolName
 * @property {string} errorCode
 * @property {string} toolName
 * @property {string} decisionId names the decision in the daemon's log and InspectRun (WARN/BLOCK/ABORT)
 * @property {number[]} evidenceSeqs seqs of the records that formed the pattern, oldest first
 * @property {string[]} evidenceCallIds call ids of those records the daemon still holds
 * @property {number} loopStartedSeq
 * @property {boolean} shadow shadow mode: computed, not enforced
 * @property {Action | ''} shadowAction what would have been enforced
 */

/**
 * @typedef {object} RunInspection
 * @property {string} runId
 * @property {string} agentId
 * @property {{seq: number, toolName: string, argsHash: string, toolCallId: string, resultHash: string, unknownToolName: string}[]} records
 * @property {boolean} guardArmed
 * @property {number} guardWindowSize
 * @property {number} guardObserved
 * @property {number} blocks
 * @property {boolean} aborted
 * @property {string} abortErrorCode
 * @property {import('./tables.js').EffectiveConfig} effectiveConfig
 * @property {number} eventsEvaluated
 */

/**
 * @typedef {object} ClientOptions
 * @property {string} [agentId] default agent id of every event
 * @property {Record<string, string>} [metadata] sent with every call
 * @property {number} [timeoutMs] deadline of the unary calls (default 10 s)
 * @property {string} [token] sent as `authorization: Bearer <token>` (the daemon's --auth-token-file)
 * @property {import('@grpc/grpc-js').ChannelCredentials} [credentials] default: insecure (loopback or a sidecar);
 *   grpc.credentials.createSsl(ca, key, chain) for a daemon serving TLS / mTLS
 * @property {string} [protoRoot] where loopwarden/v1/loopwarden.proto lives
 * @property {'shared' | 'per_run'} [streams] 'shared' (default): one Evaluate stream for every run;
 *   'per_run': one stream per run with the x-loopwarden-run-id header, for replicas behind a router
 * @property {number} [maxRunStreams] per_run mode: most streams kept open (default 1024)
 */

/**
 * @typedef {object} GuardOptions
 * @property {string} [agentId]
 * @property {string} [toolCallId]
 * @property {(verdict: Verdict) => void} [onWarning] default: console.warn announced warnings
 * @property {boolean} [failOpen] run the tool unguarded when the daemon is unreachable (default true)
 */
