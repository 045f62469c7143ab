// @ts-check
/**
 * What the plugin does at each OpenClaw hook, kept apart from registration so tests can drive it.
 *
 * Design. OpenClaw runs `before_tool_call` as a gate: a handler that throws or outlives its
 * budget blocks the call. A daemon outage must therefore never surface as a throw: every handler
 * catches its own errors and answers by the plugin's policy (fail open: let the call run; fail
 * closed: block it with a reason). Each daemon answer has its own deadline well inside the host's.
 *
 * Between `before_tool_call` and `after_tool_call` the plugin remembers each call under its
 * (run, toolCallId): the params it reported (so the outcome names the same args even if another
 * plugin rewrote them), the verdict when this plugin blocked it, and a pending warning note. A
 * call this plugin blocked is reported with loopwarden's own blocked result (`deniedReason:
 * "tool-loop"`), not OpenClaw's (`"plugin-before-tool-call"`): the daemon never hashes its own
 * veto, so the block stays sticky instead of reading as a new, different result. The memory is
 * bounded: a call whose `after_tool_call` never comes is forgotten oldest first.
 */
import { LoopwardenUnavailable, blockedToolResult } from '@loopwarden/client';
import { approvalAnswer, approvalRequest } from './approvals.js';
import { callKey, modelOutputOf, outcomeOf, runIdOf, sessionOf, turnOf, withNote } from './mapping.js';

/** @typedef {import('@loopwarden/client').Verdict} Verdict */
/** @typedef {import('@loopwarden/client').LoopwardenClient} LoopwardenClient */
/** @typedef {import('./config.js').PluginSettings} PluginSettings */
/** @typedef {import('./openclaw.js').ToolCallEvent} ToolCallEvent */
/** @typedef {import('./openclaw.js').ToolResultEvent} ToolResultEvent */
/** @typedef {import('./openclaw.js').ToolContext} ToolContext */
/** @typedef {import('./openclaw.js').AgentContext} AgentContext */
/** @typedef {import('./openclaw.js').CompactionEvent} CompactionEvent */
/** @typedef {import('./openclaw.js').SessionEndEvent} SessionEndEvent */
/** @typedef {import('./openclaw.js').SessionContext} SessionContext */
/** @typedef {import('./openclaw.js').BlockResult} BlockResult */
/** @typedef {import('./openclaw.js').MiddlewareEvent} MiddlewareEvent */
/** @typedef {import('./openclaw.js').MiddlewareContext} MiddlewareContext */
/** @typedef {import('./openclaw.js').MiddlewareResult} MiddlewareResult */
/** @typedef {import('./openclaw.js').SubagentSpawnedEvent} SubagentSpawnedEvent */
/** @typedef {import('./openclaw.js').SubagentContext} SubagentContext */
/** @typedef {import('./openclaw.js').LlmOutputEvent} LlmOutputEvent */
/** @typedef {import('./approvals.js').Resolution} Resolution */

/** @typedef {{ debug?: (message: string) => void, info: (message: string) => void, warn: (message: string) => void, error: (message: string) => void }} Logger */

/**
 * The daemon calls the hooks make: the Node client's verbs, so a test can stand in for it.
 * @typedef {Pick<LoopwardenClient, 'toolCall' | 'toolOutcome' | 'compactionRetry' | 'runEnd' | 'userTurn' | 'approval' | 'modelOutput' | 'usage'>} DaemonClient
 */

/**
 * The parent of a child session, as OpenClaw's session store records it (`parentSessionKey`, and
 * `parentSessionId`: the parent's incarnation when the child was made). undefined: not a child,
 * or unknown.
 * @typedef {(scope: { agentId?: string, sessionKey: string }) => { parentSessionKey?: string, parentSessionId?: string } | undefined} SessionParentLookup
 */

/**
 * @typedef {object} HookDeps
 * @property {DaemonClient} client
 * @property {Readonly<PluginSettings>} settings
 * @property {Logger} logger
 * @property {(sessionId: string) => boolean | Promise<boolean>} abortRun ends OpenClaw's run of a session
 * @property {SessionParentLookup} [sessionParent] reads a child session's parent from OpenClaw's session store
 */

/** Calls and sessions remembered at most; past that the oldest are forgotten. */
export const MEMORY_LIMIT = 10_000;
/** While the daemon stays unreachable, one log line per this many milliseconds. */
const OUTAGE_LOG_INTERVAL_MS = 60_000;

/**
 * A Map that forgets its oldest entries past `limit`.
 * @template K, V
 * @extends {Map<K, V>}
 */
class RecentMap extends Map {
  /** @param {number} limit */
  constructor(limit) {
    super();
    this.limit = limit;
  }

  /** @param {K} key @param {V} value */
  set(key, value) {
    this.delete(key);
    super.set(key, value);
    if (this.size > this.limit) this.delete(/** @type {K} */ (this.keys().next().value));
    return this;
  }

  /** Get and forget. @param {K} key */
  take(key) {
    const value = this.get(key);
    this.delete(key);
    return value;
  }
}

/**
 * @template T
 * @param {Promise<T>} promise @param {number} ms @param {string} what
 * @returns {Promise<T>}
 */
function within(promise, ms, what) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const deadline = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new LoopwardenUnavailable(`no answer to ${what} within ${ms} ms`)), ms);
  });
  return /** @type {Promise<T>} */ (Promise.race([promise, deadline])).finally(() => clearTimeout(timer));
}

/** @param {unknown} err */
function describe(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * @typedef {object} PendingCall
 * @property {Record<string, unknown>} params what was reported with the tool_call event
 * @property {Verdict} [blockedBy] this plugin blocked the call with this verdict
 * @property {string} [note] an announced warning waiting to be appended to the result
 * @property {string} [appended] the warning text that was appended to the result
 * @property {Verdict} [asked] the daemon asked a person about the call with this ASK verdict
 * @property {boolean} [approved] the person's answer, once OpenClaw resolved the approval
 * @property {Promise<void>} [answered] settles when the daemon has the answer (the outcome waits for it)
 */

/**
 * What the hooks remember between events: the calls in flight, the runs of each session, the runs
 * already ended.
 * @typedef {object} HookMemory
 * @property {RecentMap<string, PendingCall>} calls (run, tool, toolCallId) -> the call in flight
 * @property {RecentMap<string, Set<string>>} runsOfSession session (key or id) -> the runs seen in it
 * @property {RecentMap<string, true>} endedRuns runs this plugin saw aborted (and ended in OpenClaw)
 * @property {RecentMap<string, { turn: string, started: Promise<void> }>} turns run -> the OpenClaw run (turn) it is in
 * @property {RecentMap<string, string>} parents run -> its parent run ('' for a root), fixed at first sight
 * @property {RecentMap<string, string>} runOfSessionKey session key -> the run its latest event was of
 * @property {RecentMap<string, string>} spawnedBy child session key -> the session key that spawned it (subagent_spawned)
 */

/** @returns {HookMemory} */
export function createMemory() {
  return {
    calls: new RecentMap(MEMORY_LIMIT), runsOfSession: new RecentMap(MEMORY_LIMIT), endedRuns: new RecentMap(MEMORY_LIMIT),
    turns: new RecentMap(MEMORY_LIMIT), parents: new RecentMap(MEMORY_LIMIT), runOfSessionKey: new RecentMap(MEMORY_LIMIT),
    spawnedBy: new RecentMap(MEMORY_LIMIT),
  };
}

/**
 * Where the process keeps one HookMemory per plugin configuration. On globalThis, under a
 * registered symbol, because a module-level Map is not enough: OpenClaw 2026.9 registers a plugin
 * several times in one process (a "full" registration and "discovery" ones), each from its own
 * captured copy of the plugin's files, so each registration has its own module instance. It
 * dispatches the tool hooks to one registration and the tool-result middleware to another: with
 * memory per registration, the middleware never saw the warning before_tool_call had left for it.
 * The `v2` names the shape of HookMemory, so a different plugin version never shares it.
 */
const SHARED_MEMORY = Symbol.for('loopwarden.openclaw.hook-memory.v2');

/**
 * The process-wide memory of every registration with this configuration key (the daemon address
 * and agent id: two registrations that talk to one daemon about the same runs must agree).
 * @param {string} key
 * @returns {HookMemory}
 */
export function sharedMemory(key) {
  const holder = /** @type {Record<symbol, Map<string, HookMemory> | undefined>} */ (/** @type {unknown} */ (globalThis));
  const byKey = holder[SHARED_MEMORY] ?? (holder[SHARED_MEMORY] = new Map());
  let memory = byKey.get(key);
  if (!memory) {
    memory = createMemory();
    byKey.set(key, memory);
  }
  return memory;
}

/** @param {HookDeps & { memory?: HookMemory }} deps memory: shared with other registrations, else this instance's own */
export function createHooks({ client, settings, logger, abortRun, sessionParent, memory = createMemory() }) {
  const { calls, runsOfSession, endedRuns, turns, parents, runOfSessionKey, spawnedBy } = memory;
  let outage = { since: 0, lastLog: 0, suppressed: 0 };

  /**
   * The envelope fields of an event: agent, session (for the daemon's logs), call id.
   * @param {{ agentId?: string, sessionKey?: string, sessionId?: string }} scope @param {string} [toolCallId]
   */
  function ids(scope, toolCallId) {
    return {
      agentId: settings.agentId || scope.agentId || undefined,
      sessionId: sessionOf(scope) || undefined,
      toolCallId: toolCallId || undefined,
    };
  }

  /** @param {string} runId @param {{ sessionKey?: string, sessionId?: string }} ctx */
  function rememberRun(runId, ctx) {
    const sessionKey = ctx.sessionKey?.trim();
    if (sessionKey) runOfSessionKey.set(sessionKey, runId);
    for (const session of new Set([ctx.sessionKey, ctx.sessionId])) {
      if (!session) continue;
      const runs = runsOfSession.get(session) ?? new Set();
      runs.add(runId);
      runsOfSession.set(session, runs);
    }
  }

  /**
   * The parent run of a run, decided at its first sight and kept: the daemon fixes a run's parent
   * by its first event. A child session (a sub-agent) is known by subagent_spawned, else by
   * OpenClaw's session store; its parent run is the run the parent session's events were of, else
   * the parent's incarnation the store recorded. '' for a root (or a parent this plugin cannot
   * tell: the session then keeps its own history as a plain run).
   * @param {string} runId @param {{ agentId?: string, sessionKey?: string }} ctx
   */
  function parentOf(runId, ctx) {
    const known = parents.get(runId);
    if (known !== undefined) return known;
    let parent = '';
    const sessionKey = ctx.sessionKey?.trim();
    if (sessionKey) {
      let stored;
      try {
        stored = sessionParent?.({ agentId: ctx.agentId, sessionKey });
      } catch (err) {
        logger.debug?.(`loopwarden: no session store entry for ${sessionKey}: ${describe(err)}`);
      }
      const parentKey = spawnedBy.get(sessionKey) ?? stored?.parentSessionKey?.trim();
      parent = (parentKey && runOfSessionKey.get(parentKey)) || stored?.parentSessionId?.trim() || '';
      if (parent === runId) parent = '';
    }
    parents.set(runId, parent);
    return parent;
  }

  /**
   * A new OpenClaw run (a user message, a heartbeat or cron prompt, a parent's new instruction to
   * a sub-agent's session) is a `user_turn` of the session's run, sent once before its first
   * event; calls of one turn made in parallel wait for the same send. A session whose run the
   * daemon holds aborted (an earlier turn ended in ABORT) starts over: its run is ended and the
   * next event makes it anew, as OpenClaw's own guard leaves a new run unaffected by an old one.
   * @param {string} runId @param {string} turn @param {{ agentId?: string, sessionKey?: string, sessionId?: string }} ctx
   * @returns {Promise<void>}
   */
  function startTurn(runId, turn, ctx) {
    if (!turn) return Promise.resolve();
    const current = turns.get(runId);
    if (current?.turn === turn) return current.started;
    const opts = { ...ids(ctx), parentRunId: parentOf(runId, ctx) || undefined };
    const started = (async () => {
      const verdict = await client.userTurn(runId, { ...opts, promptId: turn });
      if (verdict.action === 'abort') {
        logger.info(`loopwarden: run ${runId} was aborted in an earlier OpenClaw run; starting it over for run ${turn}`);
        await client.runEnd(runId, opts);
        endedRuns.delete(runId);
      } else if (verdict.action === 'reject') {
        logger.warn(`loopwarden: the user turn of run ${runId} was not evaluated (${verdict.errorCode}): ${verdict.message}`);
      }
    })();
    turns.set(runId, { turn, started });
    // A turn the daemon never heard of is sent again with the next event.
    started.catch(() => { if (turns.get(runId)?.started === started) turns.delete(runId); });
    return started;
  }

  function daemonAnswered() {
    if (outage.since) {
      logger.info(`loopwarden: the daemon at ${settings.target} answers again`
        + (outage.suppressed ? ` (${outage.suppressed} more failures not logged)` : ''));
    }
    outage = { since: 0, lastLog: 0, suppressed: 0 };
  }

  /** @param {string} line */
  function logOutage(line) {
    const now = Date.now();
    if (!outage.since) outage.since = now;
    if (now - outage.lastLog < OUTAGE_LOG_INTERVAL_MS) {
      outage.suppressed += 1;
      return;
    }
    outage.lastLog = now;
    logger.warn(outage.suppressed ? `${line} (${outage.suppressed} more failures not logged)` : line);
    outage.suppressed = 0;
  }

  /**
   * The daemon could not decide (unreachable, too slow) or this plugin failed: the policy decides.
   * @param {unknown} err @param {string} toolName
   * @returns {BlockResult | undefined}
   */
  function undecided(err, toolName) {
    const reason = describe(err);
    if (!(err instanceof LoopwardenUnavailable)) {
      logger.error(`loopwarden: before_tool_call failed for ${toolName}: ${reason}`);
    }
    if (settings.failOpen) {
      logOutage(`loopwarden: daemon unavailable, running ${toolName} unguarded: ${reason}`);
      return undefined;
    }
    logOutage(`loopwarden: daemon unavailable, blocking ${toolName} (failOpen: false): ${reason}`);
    return {
      block: true,
      blockReason: `Tool call blocked: the loop guard (loopwarden) is unavailable and is set to fail closed (${reason}). `
        + 'Do not retry this call in a loop; report the failure if the task cannot go on without it.',
    };
  }

  /**
   * ABORT: the call is blocked; the run itself ends too when OpenClaw lets a plugin end it.
   * @param {string} runId @param {{ sessionId?: string }} ctx @param {Verdict} verdict
   */
  function endRun(runId, ctx, verdict) {
    // Once per run: its later calls get ABORT too (the daemon keeps it aborted until run_end).
    if (endedRuns.has(runId)) return;
    endedRuns.set(runId, true);
    const line = `loopwarden: run ${runId} aborted (${verdict.errorCode || verdict.detector}): ${verdict.message}`;
    if (!settings.abortRun) {
      logger.error(line);
      return;
    }
    const sessionId = ctx.sessionId;
    if (!sessionId) {
      logger.error(`${line}; OpenClaw gave no session id to end the run by, so its tool calls stay blocked instead`);
      return;
    }
    logger.error(`${line}; ending the OpenClaw run of session ${sessionId}`);
    // NOTE: after the hook has answered, so OpenClaw hands the blocked result over first.
    setImmediate(() => {
      Promise.resolve()
        .then(() => abortRun(sessionId))
        .then((ended) => {
          if (!ended) logger.warn(`loopwarden: OpenClaw had no active run for session ${sessionId} to end`);
        })
        .catch((err) => logger.warn(`loopwarden: could not end the run of session ${sessionId}: ${describe(err)}; `
          + 'its tool calls stay blocked instead'));
    });
  }

  /**
   * An announced warning: to the model (appended to the tool result), the log, or nowhere.
   * @param {string} key @param {Verdict} verdict @param {string} toolName
   */
  function warn(key, verdict, toolName) {
    if (settings.warnings === 'off') return;
    logger.warn(`loopwarden: ${toolName}: ${verdict.message}`);
    if (settings.warnings !== 'tool-result') return;
    const call = calls.get(key);
    if (call) call.note = verdict.message;
  }

  /**
   * OpenClaw resolved the approval of an asked call: tell the daemon, naming the call by its id
   * (else by the ASK's decision id). Never throws; the call's outcome waits for it.
   * @param {PendingCall} call @param {string} runId @param {ToolContext} ctx @param {string | undefined} toolCallId
   * @param {Resolution} resolution
   */
  function answer(call, runId, ctx, toolCallId, resolution) {
    const asked = /** @type {Verdict} */ (call.asked);
    const { approved, scope } = approvalAnswer(resolution);
    call.approved = approved;
    const opts = {
      ...ids(ctx, toolCallId), parentRunId: parentOf(runId, ctx) || undefined, approved, scope,
      decisionId: toolCallId ? undefined : asked.decisionId,
    };
    if (resolution === 'cancelled') {
      // OpenClaw showed the approval to nobody: `openclaw agent`, cron and heartbeat runs have no
      // approval surface, a gateway with no approval client has no route for it, or the run was
      // aborted while it waited. Nothing (`openclaw approvals` included) can answer it then.
      logger.warn(`loopwarden: ${ctx.toolName} in run ${runId}: OpenClaw could not ask anyone (a run with no approval surface, `
        + 'such as openclaw agent, cron or heartbeat; a gateway with no approval client or forwarding for it; or an aborted run), '
        + `so the call is denied (decision ${asked.decisionId}). Set ask: false for agents no person watches.`);
    } else {
      logger.info(`loopwarden: ${ctx.toolName} in run ${runId}: the person's answer is ${resolution} (decision ${asked.decisionId})`);
    }
    call.answered = within(client.approval(runId, opts), settings.timeoutMs, `the approval of ${ctx.toolName}`)
      .then((verdict) => {
        daemonAnswered();
        if (verdict.action === 'reject') {
          logger.warn(`loopwarden: the answer to the ${ctx.toolName} call was not taken (${verdict.errorCode}): ${verdict.message}`);
        } else if (verdict.action === 'abort') endRun(runId, ctx, verdict);
      })
      .catch((err) => {
        if (err instanceof LoopwardenUnavailable) logOutage(`loopwarden: the answer to ${ctx.toolName} not reported: ${describe(err)}`);
        else logger.error(`loopwarden: the answer to ${ctx.toolName} failed: ${describe(err)}`);
      });
  }

  return {
    /**
     * before_tool_call: may the call run? BLOCK and ABORT answer `{ block: true, blockReason }`;
     * ASK answers `{ requireApproval }`, so OpenClaw asks a person before it runs the call.
     * @param {ToolCallEvent} event @param {ToolContext} ctx
     * @returns {Promise<BlockResult | undefined>}
     */
    async beforeToolCall(event, ctx) {
      const toolName = event.toolName || ctx.toolName;
      try {
        const runId = runIdOf(ctx, event);
        if (!runId) return undefined;
        const toolCallId = event.toolCallId || ctx.toolCallId;
        const params = event.params ?? {};
        const key = callKey(runId, toolName, toolCallId, params);
        rememberRun(runId, ctx);
        calls.set(key, { params });
        const opts = { ...ids(ctx, toolCallId), parentRunId: parentOf(runId, ctx) || undefined, acceptsAsk: settings.ask };
        // NOTE: one deadline for the turn and the call: together they stay inside OpenClaw's budget.
        const verdict = await within(startTurn(runId, turnOf(ctx, event), ctx).then(() => client.toolCall(runId, toolName, params, opts)),
          settings.timeoutMs, `the ${toolName} call`);
        daemonAnswered();
        switch (verdict.action) {
          case 'ask': {
            // Only where a person can be asked (settings.ask: the call said acceptsAsk) and the
            // answer can name the call or the decision; else the ASK stands as the block it is.
            if (settings.ask && (toolCallId || verdict.decisionId)) {
              /** @type {PendingCall} */
              const call = { params, asked: verdict };
              calls.set(key, call);
              logger.warn(`loopwarden: ${toolName} held for a person (decision ${verdict.decisionId}): ${verdict.message}`);
              return {
                requireApproval: approvalRequest(verdict, toolName, settings.approvalTimeoutMs,
                  (resolution) => answer(call, runId, ctx, toolCallId, resolution)),
              };
            }
            calls.set(key, { params, blockedBy: verdict });
            return { block: true, blockReason: verdict.message };
          }
          case 'block':
          case 'abort': {
            calls.set(key, { params, blockedBy: verdict });
            if (verdict.action === 'abort') endRun(runId, ctx, verdict);
            // An ABORT without a message still tells the model and the person why: its code.
            return { block: true, blockReason: verdict.action === 'abort' ? verdict.message || verdict.errorCode : verdict.message };
          }
          case 'warn':
            if (verdict.announce) warn(key, verdict, toolName);
            return undefined;
          case 'reject':
            logger.warn(`loopwarden: the ${toolName} call was not evaluated (${verdict.errorCode}): ${verdict.message}`);
            return undefined;
          default:
            return undefined;
        }
      } catch (err) {
        return undecided(err, toolName);
      }
    },

    /**
     * after_tool_call: report what the tool returned, or its error. An ABORT here is the
     * post-compaction guard: the call already ran, so the run is ended.
     * @param {ToolResultEvent} event @param {ToolContext} ctx
     * @returns {Promise<void>}
     */
    async afterToolCall(event, ctx) {
      const toolName = event.toolName || ctx.toolName;
      try {
        const runId = runIdOf(ctx, event);
        if (!runId) return;
        const toolCallId = event.toolCallId || ctx.toolCallId;
        const key = callKey(runId, toolName, toolCallId, event.params);
        const call = calls.take(key);
        const params = call?.params ?? event.params ?? {};
        // An asked call that did not run (denied, unanswered, or held by another plugin's block) is
        // reported with loopwarden's blocked result, as a blocked call is.
        const vetoed = call?.blockedBy ?? (call?.asked && !call.approved ? call.asked : undefined);
        const outcome = vetoed ? { result: blockedToolResult(vetoed) } : outcomeOf(event, call?.appended);
        // How long the tool ran, for the tree's loopwarden.budgets.toolSecondsPerTree.
        const durationMs = !vetoed && Number.isFinite(event.durationMs) ? Math.max(0, Math.round(/** @type {number} */ (event.durationMs))) : 0;
        const opts = { ...ids(ctx, toolCallId), parentRunId: parentOf(runId, ctx) || undefined, ...outcome, durationMs };
        const verdict = await within((call?.answered ?? Promise.resolve()).then(() => client.toolOutcome(runId, toolName, params, opts)),
          settings.timeoutMs, `the ${toolName} outcome`);
        daemonAnswered();
        if (verdict.action === 'abort') endRun(runId, ctx, verdict);
        else if (verdict.action === 'reject') {
          logger.warn(`loopwarden: the ${toolName} outcome was not evaluated (${verdict.errorCode}): ${verdict.message}`);
        }
      } catch (err) {
        if (err instanceof LoopwardenUnavailable) logOutage(`loopwarden: ${toolName} outcome not reported: ${describe(err)}`);
        else logger.error(`loopwarden: after_tool_call failed for ${toolName}: ${describe(err)}`);
      }
    },

    /**
     * after_compaction: OpenClaw compacted the run's context and goes on; arms the daemon's
     * post-compaction guard and counts toward a compaction storm, whose ABORT ends the run.
     * @param {CompactionEvent} _event @param {AgentContext} ctx
     * @returns {Promise<void>}
     */
    async afterCompaction(_event, ctx) {
      try {
        const runId = runIdOf(ctx);
        if (!runId) return;
        rememberRun(runId, ctx);
        const verdict = await within(client.compactionRetry(runId, { ...ids(ctx), parentRunId: parentOf(runId, ctx) || undefined }),
          settings.timeoutMs, 'the compaction');
        daemonAnswered();
        // A compaction storm (or the guard's own abort) ends the run; its next call is blocked anyway.
        if (verdict.action === 'abort') endRun(runId, ctx, verdict);
        else if (verdict.message) logger.info(`loopwarden: run ${runId}: ${verdict.message}`);
      } catch (err) {
        if (err instanceof LoopwardenUnavailable) logOutage(`loopwarden: compaction not reported: ${describe(err)}`);
        else logger.error(`loopwarden: after_compaction failed: ${describe(err)}`);
      }
    },

    /**
     * llm_output: an attempt of an OpenClaw run is over (OpenClaw 2026.9 sends it once per attempt,
     * after its model and tool calls): its text is the answer the run ends on, a `model_output`
     * final answer for the detectors of loops without tool calls, and its usage is spent into the
     * run tree's budgets (`tokensPerTree`), which stop the tree's next tool call once spent. An
     * attempt with usage and no text is a `usage` event. OpenClaw hands a non-bundled plugin this
     * hook only with `plugins.entries.loopwarden.hooks.allowConversationAccess: true`.
     * @param {LlmOutputEvent} event @param {AgentContext} ctx
     * @returns {Promise<void>}
     */
    async llmOutput(event, ctx) {
      try {
        const runId = runIdOf(ctx, event);
        const output = runId ? modelOutputOf(event) : null;
        if (!runId || !output) return;
        rememberRun(runId, ctx);
        const opts = { ...ids(ctx), parentRunId: parentOf(runId, ctx) || undefined };
        await within(startTurn(runId, turnOf(ctx, event), ctx), settings.timeoutMs, 'the user turn');
        const sent = output.text
          ? client.modelOutput(runId, { ...opts, text: output.text, outputKind: 'final_answer', usage: output.usage })
          : client.usage(runId, { ...opts, ...output.usage });
        const verdict = await within(sent, settings.timeoutMs, 'the model output');
        daemonAnswered();
        if (verdict.action === 'abort') endRun(runId, ctx, verdict);
        else if (verdict.action === 'reject') {
          logger.warn(`loopwarden: the output of run ${runId} was not evaluated (${verdict.errorCode}): ${verdict.message}`);
        } else if (verdict.action !== 'allow' && verdict.announce && settings.warnings !== 'off') {
          logger.warn(`loopwarden: run ${runId}: ${verdict.message}`);
        }
      } catch (err) {
        if (err instanceof LoopwardenUnavailable) logOutage(`loopwarden: model output not reported: ${describe(err)}`);
        else logger.error(`loopwarden: llm_output failed: ${describe(err)}`);
      }
    },

    /**
     * session_end: every run seen in the session is over; the daemon frees their state.
     * @param {SessionEndEvent} event @param {SessionContext} ctx
     * @returns {Promise<void>}
     */
    async sessionEnd(event, ctx) {
      try {
        const scope = { agentId: ctx.agentId, sessionKey: event.sessionKey ?? ctx.sessionKey, sessionId: event.sessionId || ctx.sessionId };
        /** @type {Set<string>} */
        const runs = new Set(scope.sessionId ? runsOfSession.take(scope.sessionId) ?? [] : []);
        if (scope.sessionKey) {
          // The key outlives this incarnation: only its runs end here, not the next incarnation's.
          const ofKey = runsOfSession.get(scope.sessionKey) ?? new Set();
          for (const runId of ofKey) {
            if (runs.has(runId) || runId === scope.sessionId || runId === `session:${scope.sessionKey}`) {
              runs.add(runId);
              ofKey.delete(runId);
            }
          }
          if (ofKey.size === 0) runsOfSession.delete(scope.sessionKey);
          if (runs.has(runOfSessionKey.get(scope.sessionKey) ?? '')) runOfSessionKey.delete(scope.sessionKey);
        }
        if (runs.size === 0) return;
        for (const key of calls.keys()) {
          if (runs.has(key.slice(0, key.indexOf('\u0000')))) calls.delete(key);
        }
        const opts = ids(scope);
        await within(Promise.all([...runs].map((runId) => client.runEnd(runId, opts))), settings.timeoutMs, 'the session end');
        for (const runId of runs) {
          endedRuns.delete(runId);
          turns.delete(runId);
          parents.delete(runId);
        }
        daemonAnswered();
      } catch (err) {
        if (err instanceof LoopwardenUnavailable) logOutage(`loopwarden: session end not reported: ${describe(err)}`);
        else logger.error(`loopwarden: session_end failed: ${describe(err)}`);
      }
    },

    /**
     * subagent_spawned: the requester's session spawned a child session (a sub-agent). Its run
     * becomes a child run of the requester's, so it keeps its own history and a stop of it is
     * reported to the parent. Nothing is sent: the child's first event carries the parent.
     * @param {SubagentSpawnedEvent} event @param {SubagentContext} ctx
     */
    subagentSpawned(event, ctx) {
      const child = (event.childSessionKey || ctx.childSessionKey || '').trim();
      const requester = (ctx.requesterSessionKey || '').trim();
      if (child && requester && child !== requester) spawnedBy.set(child, requester);
    },

    /**
     * Tool-result middleware: appends an announced warning to the result the model reads.
     * @param {MiddlewareEvent} event @param {MiddlewareContext} ctx
     * @returns {MiddlewareResult | undefined}
     */
    toolResultMiddleware(event, ctx) {
      try {
        const runId = runIdOf(ctx);
        if (!runId) return undefined;
        const call = calls.get(callKey(runId, event.toolName, event.toolCallId, event.args));
        if (!call?.note) return undefined;
        const note = call.note;
        call.note = undefined;
        call.appended = note;
        return { result: withNote(event.result, note) };
      } catch (err) {
        logger.error(`loopwarden: tool-result middleware failed for ${event.toolName}: ${describe(err)}`);
        return undefined;
      }
    },
  };
}
