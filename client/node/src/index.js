// @ts-check
/**
 * loopwarden client for Node.js: ask before each tool call, report each outcome.
 *
 * The service definition is loaded from the repository's .proto at run time with
 * @grpc/proto-loader (see README.md for why no generated code is committed here). Callers never
 * see protobuf objects: verdicts come back as plain objects with lower-case names, the same shape
 * as the Python client's `Verdict`.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

export const DEFAULT_TARGET = '127.0.0.1:50051';
export const SERVICE_NAME = 'loopwarden.v1.LoopDetectionService';

/** The packed copy (`npm pack` puts proto/ beside src/), else the repository's contract. */
export const DEFAULT_PROTO_ROOT = [new URL('../proto', import.meta.url), new URL('../../../proto', import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((root) => fs.existsSync(path.join(root, 'loopwarden/v1/loopwarden.proto'))) ?? fileURLToPath(new URL('../../../proto', import.meta.url));
const PROTO_FILE = 'loopwarden/v1/loopwarden.proto';

// NOTE: longs as Number: seq and events_evaluated are uint64 on the wire but a runner numbers its
// events from 1; 2^53 events per process is not a case worth a BigInt in every caller's face.
const LOADER_OPTIONS = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true };

const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': 8 * 1024 * 1024,
  'grpc.max_send_message_length': 8 * 1024 * 1024,
};

/** @type {Map<string, any>} */
const serviceCache = new Map();

/**
 * The generated-at-run-time service constructor for one proto root.
 * @param {string} protoRoot
 */
export function loadService(protoRoot = DEFAULT_PROTO_ROOT) {
  let service = serviceCache.get(protoRoot);
  if (!service) {
    const definition = protoLoader.loadSync(PROTO_FILE, { ...LOADER_OPTIONS, includeDirs: [protoRoot] });
    /** @type {any} */
    const pkg = grpc.loadPackageDefinition(definition);
    service = pkg.loopwarden.v1.LoopDetectionService;
    serviceCache.set(protoRoot, service);
  }
  return service;
}

// ---------------------------------------------------------------------------------- errors

/** Base of every error the client raises. */
export class LoopwardenError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

/** The daemon could not be reached, or the stream broke; the next call reconnects. */
export class LoopwardenUnavailable extends LoopwardenError {}

/** InspectRun: the daemon holds no state for that run. */
export class RunNotFound extends LoopwardenError {}

/** Raised by the tool guard when the daemon aborts the run. */
export class RunAborted extends LoopwardenError {
  /** @param {Verdict} verdict */
  constructor(verdict) {
    super(verdict.message || verdict.errorCode);
    this.verdict = verdict;
  }
}

// ---------------------------------------------------------------------------------- events

/**
 * @typedef {object} EventOptions
 * @property {string} [agentId]
 * @property {string} [sessionId]
 * @property {number} [seq]
 * @property {string} [toolCallId]
 * @property {string} [paramsJson] sent verbatim instead of JSON.stringify(params)
 */

/** @param {unknown} params @param {string | undefined} paramsJson */
function paramsText(params, paramsJson) {
  if (paramsJson !== undefined) return paramsJson;
  return params === undefined || params === null ? '' : JSON.stringify(params);
}

/** @param {string} runId @param {EventOptions} opts */
function envelope(runId, opts) {
  return { runId, agentId: opts.agentId ?? '', sessionId: opts.sessionId ?? '', seq: opts.seq ?? 0 };
}

/**
 * Before a tool runs.
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {EventOptions} [opts]
 */
export function toolCallEvent(runId, toolName, params, opts = {}) {
  return {
    ...envelope(runId, opts),
    toolCall: { toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson) },
  };
}

/**
 * @typedef {EventOptions & { result?: unknown, resultJson?: string, error?: string }} OutcomeOptions
 */

/**
 * After a tool ran: `result` (any JSON-able value), `resultJson` (verbatim) or the `error` text.
 * @param {string} runId @param {string} toolName @param {unknown} [params] @param {OutcomeOptions} [opts]
 */
export function toolOutcomeEvent(runId, toolName, params, opts = {}) {
  /** @type {Record<string, unknown>} */
  const outcome = { toolName, toolCallId: opts.toolCallId ?? '', paramsJson: paramsText(params, opts.paramsJson) };
  if (opts.error !== undefined && opts.error !== null) outcome.error = opts.error;
  else if (opts.resultJson !== undefined) outcome.resultJson = opts.resultJson;
  else if ('result' in opts) outcome.resultJson = JSON.stringify(opts.result ?? null);
  return { ...envelope(runId, opts), toolOutcome: outcome };
}

/** @param {string} runId @param {EventOptions} [opts] */
export function compactionRetryEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), compactionRetry: {} };
}

/** @param {string} runId @param {EventOptions} [opts] */
export function runEndEvent(runId, opts = {}) {
  return { ...envelope(runId, opts), runEnd: {} };
}

// ---------------------------------------------------------------------------------- verdicts

/**
 * @typedef {'allow' | 'warn' | 'block' | 'abort' | 'reject'} Action
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
 * @property {Record<string, unknown>} effectiveConfig
 * @property {number} eventsEvaluated
 */

/** @param {any} message @returns {RunInspection} */
function inspectionFromMessage(message) {
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

// ---------------------------------------------------------------------------------- client

/**
 * @typedef {object} ClientOptions
 * @property {string} [agentId] default agent id of every event
 * @property {Record<string, string>} [metadata] sent with every call
 * @property {number} [timeoutMs] deadline of the unary calls (default 10 s)
 * @property {string} [token] sent as `authorization: Bearer <token>` (the daemon's --auth-token-file)
 * @property {grpc.ChannelCredentials} [credentials] default: insecure (loopback or a sidecar);
 *   grpc.credentials.createSsl(ca, key, chain) for a daemon serving TLS / mTLS
 * @property {string} [protoRoot] where loopwarden/v1/loopwarden.proto lives
 */

/** @param {unknown} err */
function describe(err) {
  const e = /** @type {any} */ (err);
  if (e && typeof e.code === 'number') {
    const name = Object.keys(grpc.status).find((k) => /** @type {any} */ (grpc.status)[k] === e.code) ?? e.code;
    return `${name}: ${e.details ?? e.message}`;
  }
  return 'the daemon closed the stream';
}

/**
 * Holds one Evaluate stream open and reopens it after a failure; a run keeps its state on the
 * daemon across streams. Calls may overlap: the daemon answers requests in order, so pending
 * calls wait in a FIFO and each response settles the oldest one.
 */
export class LoopwardenClient {
  /** @param {string} [target] @param {ClientOptions} [options] */
  constructor(target = DEFAULT_TARGET, options = {}) {
    const Service = loadService(options.protoRoot);
    this.stub = new Service(target, options.credentials ?? grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
    this.agentId = options.agentId ?? '';
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries(options.metadata ?? {})) this.metadata.set(key, value);
    if (options.token) this.metadata.set('authorization', `Bearer ${options.token}`);
    this.nextSeq = 1;
    /** @type {any} */
    this.call = null;
    /** @type {{resolve: (v: Verdict[]) => void, reject: (e: Error) => void}[]} */
    this.pending = [];
  }

  /** @param {EventOptions} opts */
  common(opts) {
    return { ...opts, agentId: opts.agentId ?? this.agentId, seq: opts.seq ?? this.nextSeq++ };
  }

  /** @returns {any} */
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
    call.on('error', (/** @type {unknown} */ err) => fail(new LoopwardenUnavailable(describe(err))));
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

  /** @param {string} method @param {object} request @returns {Promise<any>} */
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
      throw new LoopwardenUnavailable(describe(err));
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
      throw new LoopwardenUnavailable(describe(err));
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

// ---------------------------------------------------------------------------------- tool guard

/**
 * What the model sees instead of running a blocked call (spec section 6).
 * @param {Verdict} verdict
 */
export function blockedToolResult(verdict) {
  return {
    content: [{ type: 'text', text: verdict.message }],
    details: { status: 'blocked', deniedReason: 'tool-loop', detector: verdict.detector, count: verdict.count },
  };
}

/** @param {Verdict} verdict */
function logWarning(verdict) {
  if (verdict.announce) console.warn(`loopwarden: ${verdict.message}`);
}

/**
 * @typedef {object} GuardOptions
 * @property {string} [agentId]
 * @property {string} [toolCallId]
 * @property {(verdict: Verdict) => void} [onWarning] default: console.warn announced warnings
 * @property {boolean} [failOpen] run the tool unguarded when the daemon is unreachable (default true)
 */

/**
 * Wrap an async tool so it asks loopwarden first and reports its outcome after: the same
 * semantics as the Python ToolGuard. BLOCK returns `blockedToolResult` instead of running (and
 * reports it as the outcome), ABORT throws RunAborted, WARN calls `onWarning` and runs the tool.
 *
 * @template {Record<string, unknown>} P
 * @template R
 * @param {LoopwardenClient} client
 * @param {string} runId
 * @param {string} toolName
 * @param {(params: P) => Promise<R> | R} fn
 * @param {GuardOptions} [options]
 * @returns {(params?: P) => Promise<R | ReturnType<typeof blockedToolResult>>}
 */
export function guardTool(client, runId, toolName, fn, options = {}) {
  const onWarning = options.onWarning ?? logWarning;
  const failOpen = options.failOpen ?? true;
  const ids = { toolCallId: options.toolCallId, agentId: options.agentId };
  return async (params = /** @type {P} */ ({})) => {
    let verdict;
    try {
      verdict = await client.toolCall(runId, toolName, params, ids);
    } catch (err) {
      if (!(err instanceof LoopwardenUnavailable) || !failOpen) throw err;
      console.warn(`loopwarden unavailable, running ${toolName} unguarded: ${err.message}`);
      return fn(params);
    }
    if (verdict.action === 'abort') throw new RunAborted(verdict);
    if (verdict.action === 'block') {
      const blocked = blockedToolResult(verdict);
      await client.toolOutcome(runId, toolName, params, { ...ids, result: blocked });
      return blocked;
    }
    if (verdict.action === 'warn') onWarning(verdict);
    let result;
    try {
      result = await fn(params);
    } catch (err) {
      const e = /** @type {any} */ (err);
      await client.toolOutcome(runId, toolName, params, { ...ids, error: `${e?.name ?? 'Error'}: ${e?.message ?? e}` });
      throw err;
    }
    const after = await client.toolOutcome(runId, toolName, params, { ...ids, result });
    if (after.action === 'abort') throw new RunAborted(after);
    return result;
  };
}

export const PROTO_PATH = path.join(DEFAULT_PROTO_ROOT, PROTO_FILE);
