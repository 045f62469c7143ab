// @ts-check
/** LoopwardenClient: the verbs over one Evaluate stream, plus the unary Check and InspectRun. */

/**
 * @import { ApprovalOptions, ClientOptions, EventExtra, EventOptions, Exemption, ModelOutputOptions, OutcomeOptions, RunInspection, UsageOptions, Verdict }
 *   from './types.js'
 */
import grpc from '@grpc/grpc-js';

import { ExemptionNotFound, LoopwardenUnavailable, RunNotFound, describeRpcError } from './errors.js';
import {
  approvalEvent, compactionRetryEvent, modelOutputEvent, runEndEvent, toolCallEvent, toolClass, toolOutcomeEvent, usageEvent,
  userTurnEvent,
} from './events.js';
import { exemptionFromMessage, inspectionFromMessage } from './inspection.js';
import { createStub } from './stub.js';
import { guardrailSpans } from './tracing.js';
import { RunTrees } from './trees.js';
import { verdictFromMessage } from './verdicts.js';

export const DEFAULT_TARGET = '127.0.0.1:50051';
/** The metadata header routers hash to keep a run on one replica. */
export const ROUTING_HEADER = 'x-loopwarden-run-id';

/**
 * Two stream modes. `streams: 'shared'` (the default, for one daemon) holds one Evaluate stream
 * for every run and reopens it after a failure. `streams: 'per_run'` (for several replicas behind
 * a router) opens one stream per run with `x-loopwarden-run-id` set at stream open, closes it
 * after run_end, keeps at most `maxRunStreams` (least recently used closed first), and reopens a
 * failed stream (closed for idleness, its replica gone) and resends the request once,
 * transparently: events carry a seq, so a resend the daemon already saw gets its first verdict.
 * Check and InspectRun always carry the header. A run keeps its state on the daemon across
 * streams.
 *
 * Run trees: an event with `parentRunId` is of a child run (a sub-agent), which the daemon keeps
 * with its tree, so the header names the tree's ROOT run: one stream per tree in the per_run mode.
 * The client learns each child's root from the events it sends; a sub-agent whose parent this
 * client never saw passes `rootRunId`. Calls may overlap: the daemon answers requests in order, so pending calls wait in a
 * FIFO and each response settles the oldest one.
 */
export class LoopwardenClient {
  /** @param {string} [target] @param {ClientOptions} [options] */
  constructor(target = DEFAULT_TARGET, options = {}) {
    /** @private */
    this.stub = createStub(target, options.credentials ?? grpc.credentials.createInsecure(), options.protoRoot);
    this.agentId = options.agentId ?? '';
    this.acceptsAsk = options.acceptsAsk ?? false;
    /** @private */
    this.trees = new RunTrees();
    this.timeoutMs = options.timeoutMs ?? 10_000;
    /** @private */
    this.metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries(options.metadata ?? {})) this.metadata.set(key, value);
    if (options.token) this.metadata.set('authorization', `Bearer ${options.token}`);
    /** @private */
    this.nextSeq = 1;
    /** @private @type {any} */
    this.call = null;
    /** @private @type {{resolve: (v: Verdict[]) => void, reject: (e: Error) => void}[]} */
    this.pending = [];
    const streams = options.streams ?? 'shared';
    if (streams !== 'shared' && streams !== 'per_run') {
      throw new TypeError(`streams must be 'shared' or 'per_run', got ${JSON.stringify(streams)}`);
    }
    /** @private */
    this.perRun = streams === 'per_run';
    /** @private */
    this.maxRunStreams = options.maxRunStreams ?? 1024;
    /** @private @type {Map<string, RunStream>} most recently used last */
    this.runStreams = new Map();
    /** Guardrail spans (tracing.js): null unless @opentelemetry/api is installed and the GenAI opt-in is set. */
    this.tracing = guardrailSpans(target, options.tracerProvider);
  }

  /** @private @param {string} runId @param {Record<string, string>} [headers] trace context, in place of the caller's */
  routed(runId, headers = {}) {
    const metadata = this.metadata.clone();
    for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
    const id = runId.trim();
    if (id) metadata.set(ROUTING_HEADER, id);
    return metadata;
  }

  /** @private @template {EventOptions} T @param {string} runId @param {T} opts @returns {T} */
  common(runId, opts) {
    this.trees.learn(runId, opts.parentRunId, opts.rootRunId);
    return {
      ...opts, agentId: opts.agentId ?? this.agentId, seq: opts.seq ?? this.nextSeq++,
      acceptsAsk: opts.acceptsAsk ?? this.acceptsAsk,
    };
  }

  /** The root of runId's tree as far as this client knows: what its routing header names. @param {string} runId */
  rootOf(runId) {
    return this.trees.root(runId);
  }

  /** @private @returns {any} */
  stream() {
    if (this.call) return this.call;
    const call = this.stub.Evaluate(this.metadata);
    /** @param {Error} err */
    const fail = (err) => {
      if (this.call === call) this.call = null;
      for (const waiter of this.pending.splice(0)) waiter.reject(err);
    };
    call.on('data', (/** @type {any} */ response) => {
      const waiter = this.pending.shift();
      waiter?.resolve(response.verdicts.map(verdictFromMessage));
    });
    call.on('error', (/** @type {unknown} */ err) => fail(new LoopwardenUnavailable(describeRpcError(err))));
    call.on('end', () => fail(new LoopwardenUnavailable('the daemon closed the stream')));
    this.call = call;
    return call;
  }

  /**
   * Send one request carrying several events; one verdict per event, in order.
   * @param {object[]} events
   * @returns {Promise<Verdict[]>}
   */
  evaluate(events) {
    if (!this.tracing) return this.evaluateUntraced(events);
    return this.tracing.request(events, () => this.evaluateUntraced(events));
  }

  /** @private @param {object[]} events @returns {Promise<Verdict[]>} */
  evaluateUntraced(events) {
    if (this.perRun) return this.evaluatePerRun(events);
    return new Promise((resolve, reject) => {
      const call = this.stream();
      this.pending.push({ resolve, reject });
      call.write({ events });
    });
  }

  /** @private @param {any[]} events @returns {Promise<Verdict[]>} */
  async evaluatePerRun(events) {
    /** @type {Map<string, number[]>} */
    const groups = new Map();
    events.forEach((event, index) => {
      // One stream per tree: a child's events go on its root's stream.
      const root = this.trees.learn(String(event.runId ?? ''), String(event.parentRunId ?? ''));
      const positions = groups.get(root);
      if (positions) positions.push(index);
      else groups.set(root, [index]);
    });
    /** @type {Verdict[]} */
    const verdicts = new Array(events.length);
    await Promise.all([...groups].map(async ([root, positions]) => {
      const batch = positions.map((i) => events[i]);
      const answers = await this.runRequest(root, batch);
      positions.forEach((position, k) => { verdicts[position] = answers[k]; });
      // A child's end cannot close its tree's stream; the root's can.
      if (batch.some((event) => event.runEnd && String(event.runId ?? '').trim() === root)) this.closeRunStream(root);
      for (const event of batch) if (event.runEnd) this.trees.forget(String(event.runId ?? ''));
    }));
    return verdicts;
  }

  /** @private @param {string} runId the tree's root @param {object[]} batch @returns {Promise<Verdict[]>} */
  async runRequest(runId, batch) {
    for (let attempt = 1; ; attempt++) {
      let stream = this.runStreams.get(runId);
      if (!stream || stream.closed) {
        if (this.runStreams.size >= this.maxRunStreams) {
          const oldest = this.runStreams.keys().next().value;
          if (oldest !== undefined) this.closeRunStream(oldest);
        }
        stream = new RunStream(this.stub.Evaluate(this.routed(runId)));
      }
      this.runStreams.delete(runId);
      this.runStreams.set(runId, stream);
      try {
        return await stream.request(batch);
      } catch (err) {
        if (this.runStreams.get(runId) === stream) this.closeRunStream(runId);
        if (attempt >= 2) throw err;
      }
    }
  }

  /** @private @param {string} runId */
  closeRunStream(runId) {
    const stream = this.runStreams.get(runId);
    this.runStreams.delete(runId);
    stream?.close();
  }

  /** @param {object} event @returns {Promise<Verdict>} */
  async send(event) {
    const [verdict] = await this.evaluate([event]);
    return verdict;
  }

  /**
   * Before a tool runs: may it run? ALLOW/WARN: run it.
   * @param {string} runId @param {string} toolName @param {unknown} [params] @param {EventOptions & EventExtra} [opts]
   */
  async toolCall(runId, toolName, params, opts = {}) {
    toolClass(opts.toolClass); // a bad class rejects before the call takes a seq
    return this.send(toolCallEvent(runId, toolName, params, this.common(runId, opts)));
  }

  /**
   * After a tool ran: what it returned (`result`) or the `error` text.
   * @param {string} runId @param {string} toolName @param {unknown} [params] @param {OutcomeOptions} [opts]
   */
  toolOutcome(runId, toolName, params, opts = {}) {
    return this.send(toolOutcomeEvent(runId, toolName, params, this.common(runId, opts)));
  }

  /** The runner compacted its context after an overflow and retries: arms the guard. @param {string} runId @param {EventOptions & EventExtra} [opts] */
  compactionRetry(runId, opts = {}) {
    return this.send(compactionRetryEvent(runId, this.common(runId, opts)));
  }

  /**
   * A person or an orchestrator sent the run a new instruction (`promptId` names it): the run
   * starts fresh for loop detection unless loopwarden.userTurnResets is false, and keeps its
   * budgets; an aborted run stays aborted. @param {string} runId @param {EventOptions & EventExtra} [opts]
   */
  userTurn(runId, opts = {}) {
    return this.send(userTurnEvent(runId, this.common(runId, opts)));
  }

  /**
   * What one model response cost (tokens, US dollars), for the tree's token and cost budgets.
   * @param {string} runId @param {UsageOptions} [opts]
   */
  usage(runId, opts = {}) {
    return this.send(usageEvent(runId, this.common(runId, opts)));
  }

  /**
   * What the model said (see modelOutputEvent): 'allow', 'warn' (show the message) or 'abort' (end
   * the run). @param {string} runId @param {ModelOutputOptions} opts
   */
  async modelOutput(runId, opts) {
    modelOutputEvent(runId, opts); // a bad kind throws before it takes a seq
    return this.send(modelOutputEvent(runId, this.common(runId, opts)));
  }

  /**
   * A human's answer to an 'ask' verdict, naming the asked call by `toolCallId` or the ASK's
   * `decisionId`; `scope` 'once' (the next critical asks again) or 'always' (a standing exemption).
   * @param {string} runId @param {ApprovalOptions} opts
   */
  async approval(runId, opts) {
    approvalEvent(runId, opts); // a bad approval throws before it takes a seq
    return this.send(approvalEvent(runId, this.common(runId, opts)));
  }

  /** The run is over: the daemon frees its state. @param {string} runId @param {EventOptions & EventExtra} [opts] */
  runEnd(runId, opts = {}) {
    return this.send(runEndEvent(runId, this.common(runId, opts)));
  }

  /**
   * @private @param {string} method @param {object} request @param {string} runId the tree's root ('' for no header)
   * @param {Record<string, string>} [headers] @returns {Promise<any>}
   */
  unary(method, request, runId, headers) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + this.timeoutMs);
      this.stub[method](request, this.routed(runId, headers), { deadline }, (/** @type {any} */ err, /** @type {any} */ response) => {
        if (err) reject(err);
        else resolve(response);
      });
    });
  }

  /**
   * The unary Check RPC: the same decision for one event, without a stream.
   * @param {object} event @returns {Promise<Verdict>}
   */
  async check(event) {
    if (!this.tracing) return this.checkUntraced(event, {});
    const [verdict] = await this.tracing.request([event], async (headers) => [await this.checkUntraced(event, headers)]);
    return verdict;
  }

  /** @private @param {object} event @param {Record<string, string>} headers @returns {Promise<Verdict>} */
  async checkUntraced(event, headers) {
    try {
      const e = /** @type {any} */ (event);
      const response = await this.unary('Check', { event }, this.trees.learn(String(e.runId ?? ''), String(e.parentRunId ?? '')),
        headers);
      return verdictFromMessage(response.verdict);
    } catch (err) {
      throw new LoopwardenUnavailable(describeRpcError(err));
    }
  }

  /**
   * Read-only view of one run (the InspectRun RPC); RunNotFound for a run the daemon does not hold.
   * @param {string} runId @returns {Promise<RunInspection>}
   */
  async inspect(runId) {
    try {
      return inspectionFromMessage(await this.unary('InspectRun', { runId }, this.trees.root(runId)));
    } catch (err) {
      const e = /** @type {any} */ (err);
      if (e?.code === grpc.status.NOT_FOUND) throw new RunNotFound(e.details);
      throw new LoopwardenUnavailable(describeRpcError(err));
    }
  }

  /**
   * The tenant's standing approvals ('always' answers to an ASK), newest first; optionally only
   * those of one agent and/or tool (the ListExemptions RPC).
   * @param {{ agentId?: string, toolName?: string }} [filter] @returns {Promise<Exemption[]>}
   */
  async listExemptions(filter = {}) {
    try {
      const request = { agentId: filter.agentId ?? '', toolName: filter.toolName ?? '' };
      const response = await this.unary('ListExemptions', request, '');
      return (response.exemptions ?? []).map(exemptionFromMessage);
    } catch (err) {
      throw new LoopwardenUnavailable(describeRpcError(err));
    }
  }

  /**
   * Withdraw one standing approval by its id (the RevokeExemption RPC): the next matching
   * critical is asked (or blocked) again. Returns the revoked exemption; ExemptionNotFound for an
   * id the tenant does not hold.
   * @param {string} id @returns {Promise<Exemption>}
   */
  async revokeExemption(id) {
    try {
      return exemptionFromMessage((await this.unary('RevokeExemption', { id }, '')).revoked ?? {});
    } catch (err) {
      const e = /** @type {any} */ (err);
      if (e?.code === grpc.status.NOT_FOUND) throw new ExemptionNotFound(e.details);
      throw new LoopwardenUnavailable(describeRpcError(err));
    }
  }

  close() {
    if (this.call) {
      this.call.end();
      this.call = null;
    }
    for (const runId of [...this.runStreams.keys()]) this.closeRunStream(runId);
    this.stub.close();
  }
}

/** One run's Evaluate stream (per_run mode): requests answered in order, a FIFO of waiters. */
class RunStream {
  /** @param {any} call */
  constructor(call) {
    /** @private */
    this.call = call;
    this.closed = false;
    /** @private @type {{resolve: (v: Verdict[]) => void, reject: (e: Error) => void}[]} */
    this.pending = [];
    /** @param {Error} err */
    const fail = (err) => {
      this.closed = true;
      for (const waiter of this.pending.splice(0)) waiter.reject(err);
    };
    call.on('data', (/** @type {any} */ response) => {
      this.pending.shift()?.resolve(response.verdicts.map(verdictFromMessage));
    });
    call.on('error', (/** @type {unknown} */ err) => fail(new LoopwardenUnavailable(describeRpcError(err))));
    call.on('end', () => fail(new LoopwardenUnavailable('the daemon closed the stream')));
  }

  /** @param {object[]} events @returns {Promise<Verdict[]>} */
  request(events) {
    return new Promise((resolve, reject) => {
      if (this.closed) {
        reject(new LoopwardenUnavailable('the stream is closed'));
        return;
      }
      this.pending.push({ resolve, reject });
      this.call.write({ events });
    });
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.call.cancel();
  }
}
