// @ts-check
/** The errors the client raises, and how a failed RPC reads inside one. */

/** @import { Verdict } from './types.js' */
import grpc from '@grpc/grpc-js';

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

/** RevokeExemption: the tenant holds no exemption of that id. */
export class ExemptionNotFound extends LoopwardenError {}

/** Raised by the tool guard when the daemon aborts the run. */
export class RunAborted extends LoopwardenError {
  /** @param {Verdict} verdict */
  constructor(verdict) {
    super(verdict.message || verdict.errorCode);
    this.verdict = verdict;
  }
}

/**
 * 'UNAVAILABLE: No connection established' for a gRPC error; anything else is a closed stream.
 * @param {unknown} err
 */
export function describeRpcError(err) {
  const e = /** @type {any} */ (err);
  if (e && typeof e.code === 'number') {
    const name = Object.keys(grpc.status).find((k) => /** @type {any} */ (grpc.status)[k] === e.code) ?? e.code;
    return `${name}: ${e.details ?? e.message}`;
  }
  return 'the daemon closed the stream';
}
