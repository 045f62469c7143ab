// @ts-check
/** LoopwardenClient: the verbs over one Evaluate stream, plus the unary Check and InspectRun. */

/** @import { ClientOptions, EventOptions, OutcomeOptions, RunInspection, Verdict } from './types.js' */
import grpc from '@grpc/grpc-js';

import { LoopwardenUnavailable, RunNotFound, describeRpcError } from './errors.js';
import { compactionRetryEvent, runEndEvent, toolCallEvent, toolOutcomeEvent } from './events.js';
import { inspectionFromMessage } from './inspection.js';
import { createStub } from './stub.js';
import { verdictFromMessage } from './verdicts.js';

export const DEFAULT_TARGET = '127.0.0.1:50051';

/**
 * Holds one Evaluate stream open and reopens it after a failure; a run keeps its state on the
 * daemon across streams. Calls may overlap: the daemon answers requests in order, so pending
 * calls wait in a FIFO and each response settles the oldest one.
 */
export class LoopwardenClient {
  /** @param {string} [target] @param {ClientOptions} [options] */
  constructor(target = DEFAULT_TARGET, options = {}) {
    /** @private */
    this.stub = createStub(target, options.credentials ?? grpc.credentials.createInsecure(), options.protoRoot);
    this.agentId = options.agentId ?? '';
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
  }

  /** @private @param {EventOptions} opts */
  common(opts) {
    return { ...opts, agentId: opts.agentId ?? this.agentId, seq: opts.seq ?? this.nextSeq++ };
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
    return new Promise((resolve, reject) => {
      const call = this.stream();
      this.pending.push({ resolve, reject });
      call.write({ events });
    });
  }

  /** @param {object} event @returns {Promise<Verdict>} */
  async send(event) {
    const [verdict] = await this.evaluate([event]);
    return verdict;
  }

  /**
   * Before a tool runs: may it run? ALLOW/WARN: run it.
   * @param {string} runId @param {string} toolName @param {unknown} [params] @param {EventOptions} [opts]
   */
  toolCall(runId, toolName, params, opts = {}) {
    return this.send(toolCallEvent(runId, toolName, params, this.common(opts)));
  }

  /**
   * After a tool ran: what it returned (`result`) or the `error` text.
   * @param {string} runId @param {string} toolName @param {unknown} [params] @param {OutcomeOptions} [opts]
   */
  toolOutcome(runId, toolName, params, opts = {}) {
    return this.send(toolOutcomeEvent(runId, toolName, params, this.common(opts)));
  }

  /** The runner compacted its context after an overflow and retries: arms the guard. @param {string} runId @param {EventOptions} [opts] */
  compactionRetry(runId, opts = {}) {
    return this.send(compactionRetryEvent(runId, this.common(opts)));
  }

  /** The run is over: the daemon frees its state. @param {string} runId @param {EventOptions} [opts] */
  runEnd(runId, opts = {}) {
    return this.send(runEndEvent(runId, this.common(opts)));
  }

  /** @private @param {string} method @param {object} request @returns {Promise<any>} */
  unary(method, request) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + this.timeoutMs);
      this.stub[method](request, this.metadata, { deadline }, (/** @type {any} */ err, /** @type {any} */ response) => {
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
    try {
      const response = await this.unary('Check', { event });
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
      return inspectionFromMessage(await this.unary('InspectRun', { runId }));
    } catch (err) {
      const e = /** @type {any} */ (err);
      if (e?.code === grpc.status.NOT_FOUND) throw new RunNotFound(e.details);
      throw new LoopwardenUnavailable(describeRpcError(err));
    }
  }

  close() {
    if (this.call) {
      this.call.end();
      this.call = null;
    }
    this.stub.close();
  }
}
