// @ts-check
// Loads the guard-policy table (tests/conformance/guard/policy.json, see its README.md): each
// scenario's verdict as the client receives it off the wire, and the expectation at a place.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

import { PROTO_PATH } from '../../src/stub.js';

export const TABLE = fileURLToPath(new URL('../../../../tests/conformance/guard/policy.json', import.meta.url));

/** @typedef {{ effect: string, text?: string, reported?: boolean }} Seen */
/** @typedef {{ name: string, can_ask?: boolean, verdict: Record<string, unknown>, expect: Seen }} Scenario */

/** @returns {Scenario[]} */
export function loadScenarios() {
  return JSON.parse(fs.readFileSync(TABLE, 'utf8')).scenarios;
}

/** The table's `outputs`: verdicts on what the model wrote or on a compaction. @returns {Scenario[]} */
export function loadOutputScenarios() {
  return JSON.parse(fs.readFileSync(TABLE, 'utf8')).outputs;
}

/** @param {string} name */
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** @param {unknown} value @returns {unknown} */
function camelKeys(value) {
  if (Array.isArray(value)) return value.map(camelKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [camel(k), camelKeys(v)]));
  }
  return value;
}

/** @type {protobuf.Type | undefined} */
let verdictType;

/**
 * The scenario's verdict encoded as the proto Verdict and decoded the way the client's stub
 * decodes it (stub.js LOADER_OPTIONS): the message `verdictFromMessage` gets from the daemon.
 * @param {Scenario} scenario @param {string} runId
 */
export function verdictMessage(scenario, runId) {
  verdictType ??= protobuf.loadSync(PROTO_PATH).lookupType('loopwarden.v1.Verdict');
  const message = verdictType.fromObject(/** @type {any} */ ({ .../** @type {object} */ (camelKeys(scenario.verdict)), runId, seq: 1 }));
  const wire = verdictType.decode(verdictType.encode(message).finish());
  return verdictType.toObject(wire, { enums: String, longs: Number, defaults: true, arrays: true });
}

/**
 * The expectation, with what the table does not assert dropped from `seen`.
 * @param {Scenario} scenario @param {Seen} seen
 */
export function compared(scenario, seen) {
  const want = { text: '', ...scenario.expect };
  /** @type {Seen} */
  const got = { effect: seen.effect, text: seen.text ?? '' };
  if ('reported' in want) got.reported = seen.reported ?? false;
  return { want, got };
}
