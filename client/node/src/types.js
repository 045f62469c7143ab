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
 * @property {string} [parentRunId] this run is a child of that run (a sub-agent), fixed by the
 *   run's first event; the client routes the run by its tree's root
 * @property {string} [rootRunId] the tree's root, for routing, when this client never saw the
 *   chain of parents (a sub-agent in another process)
 * @property {boolean} [acceptsAsk] the caller can hold a call for a human: it may be answered
 *   'ask' (default: the client's acceptsAsk)
 */

// generated:event-extra:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
/**
 * The event fields without an option of their own (tables/loopwarden.toml's [event_builders]):
 * each is carried as it is into the Event or its kind message.
 * @typedef {object} EventExtra
 */
// generated:event-extra:end

/**
 * @typedef {EventOptions & EventExtra & { result?: unknown, resultJson?: string, error?: string, durationMs?: number }} OutcomeOptions
 * `durationMs`: how long the tool ran (loopwarden.budgets.toolSecondsPerTree; 0 = not reported)
 */

/**
 * @typedef {EventOptions & EventExtra & { inputTokens?: number, outputTokens?: number, costUsd?: number, model?: string }} UsageOptions
 * What one model response cost: tokens and US dollars (finite, not negative); `model` goes to logs only.
 */

/**
 * @typedef {EventOptions & EventExtra & { text?: string, textDigest?: string, outputKind?: 'message' | 'thought' | 'final_answer', stopHookActive?: boolean, usage?: { inputTokens?: number, outputTokens?: number, costUsd?: number, model?: string } }} ModelOutputOptions
 * What the model said: `text` or your own `textDigest` of it (one is required), its kind, whether a
 * stop hook already kept the turn going, and what the response cost (spent as a usage event's).
 */

/**
 * @typedef {EventOptions & EventExtra & { approved: boolean, decisionId?: string, scope?: 'once' | 'always', ttlSeconds?: number }} ApprovalOptions
 * A human's answer to an ASK: `toolCallId` (EventOptions) or `decisionId` names the asked call;
 * `scope` 'once' (default) or 'always' (a standing exemption for `ttlSeconds`, 0: the daemon's default).
 */

/**
 * What the runner must do. 'ask' (only for events with acceptsAsk): hold the call for a human, run
 * it only if they approve, and report the answer with `approval`. An action newer than this client
 * reads as 'block'.
 * @typedef {'allow' | 'warn' | 'block' | 'abort' | 'reject' | 'ask'} Action
 */

/**
 * What an `onAsk` handler answers (it shows the human `verdict.message`): true or 'once' runs this
 * call; 'always' runs it and keeps a standing exemption for this agent, tool and arguments; false,
 * null or undefined does not run it (the pattern's later criticals block).
 * @typedef {boolean | 'once' | 'always' | null | undefined} AskAnswer
 */

/**
 * Spending counted for loopwarden.budgets, of a run or of its whole tree.
 * @typedef {object} Totals
 * @property {number} toolCalls tool calls evaluated (retries once)
 * @property {number} toolMs sum of the outcomes' durationMs
 * @property {number} inputTokens
 * @property {number} outputTokens
 * @property {number} costUsd
 * @property {number} wallSeconds since the run's (the tree's) first event
 * @property {number} runs runs of the tree so far, ended ones too; 1 for a run alone
 */

/**
 * A standing approval (an 'always' answer to an ASK): criticals of this agent, tool and projected
 * arguments are allowed until it expires; budgets and the breakers still apply.
 * @typedef {object} Exemption
 * @property {string} id
 * @property {string} agentId '' for the global config's agent
 * @property {string} toolName normalised
 * @property {string} argsHash as a record's argsHash
 * @property {number} createdAt unix seconds
 * @property {number} expiresAt unix seconds
 * @property {string} runId the run whose ASK it answered
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

// generated:run-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
/**
 * One entry of a run's history.
 * @typedef {object} RunRecord
 * @property {number} seq The seq of the event that created the record.
 * @property {string} toolName The tool as the call that formed the record spelled it (args_hash is
 * over the normalised name).
 * @property {string} argsHash The hash of the call's projected arguments.
 * @property {string} toolCallId The call's tool call id, if it had one.
 * @property {string} resultHash The hash of the outcome; empty while the call is pending (no
 * outcome yet).
 * @property {string} unknownToolName The missing tool's name when the outcome's error said no such
 * tool exists.
 */
// generated:run-record:end

/**
 * @typedef {object} RunInspection
 * @property {string} runId
 * @property {string} agentId
 * @property {RunRecord[]} records
 * @property {boolean} guardArmed
 * @property {number} guardWindowSize
 * @property {number} guardObserved
 * @property {number} blocks
 * @property {boolean} aborted
 * @property {string} abortErrorCode
 * @property {import('./tables.js').EffectiveConfig} effectiveConfig
 * @property {number} eventsEvaluated
 * @property {string} parentRunId the run's parent ('' for a root)
 * @property {string[]} children its child runs, oldest first (ended ones too)
 * @property {string} rootRunId the root of its tree (itself for a root)
 * @property {number} depth its depth in the tree (root: 0)
 * @property {Totals} treeTotals what the whole tree has spent
 * @property {Totals} runTotals what this run alone has spent
 * @property {Exemption[]} exemptions standing approvals of the tenant that apply to this run's agent
 * @property {OutputStreaks} outputStreaks the counts the detectors of loops without tool calls judge it by
 */

/**
 * Where the detectors of loops without tool calls stand for a run (all 0: none counted anything).
 * @typedef {object} OutputStreaks
 * @property {number} messages repeated_output: identical messages in a row
 * @property {number} thoughts identical thoughts in a row
 * @property {number} finalAnswers identical final answers in a row
 * @property {number} compactions compaction_storm: compactions since the last new tool result
 * @property {number} stopContinuations stop_continuation: final answers a stop hook kept going, in a row
 * @property {number} finalAnswerTurns repeated_final_answer: turns in a row ending in the same answer
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
 * @property {boolean} [acceptsAsk] every event says the caller can hold a call for a human (an
 *   event's own acceptsAsk wins), so criticals and budgets configured to ask are answered 'ask'
 * @property {any} [tracerProvider] the OpenTelemetry TracerProvider of the guardrail spans (default:
 *   the global one); spans only with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (tracing.js)
 */

/**
 * @typedef {object} GuardOptions
 * @property {string} [agentId]
 * @property {string} [toolCallId]
 * @property {(verdict: Verdict) => void} [onWarning] default: console.warn announced warnings
 * @property {boolean} [failOpen] run the tool unguarded when the daemon is unreachable (default true)
 * @property {string} [parentRunId] the guarded run is a child run (a sub-agent) of that run
 * @property {string} [rootRunId] its tree's root, when the client never saw the chain of parents
 * @property {(verdict: Verdict) => AskAnswer | Promise<AskAnswer>} [onAsk] the guard can hold a
 *   call for a human (its events say acceptsAsk): on an 'ask' it calls this, reports the answer as
 *   an approval and runs the tool only if approved
 */
