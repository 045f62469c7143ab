// @ts-check
// Every conformance scenario (tests/conformance/scenarios) through the real daemon, over a real
// Evaluate stream held by the Node client, with the assertions of the Python runner.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { LoopwardenClient } from '../src/index.js';
import { startDaemon } from './support/daemon.js';
import { check, expand, loadVariants, protoNames } from './support/scenarios.js';

const VARIANTS = loadVariants();
// The scenarios the Python suite also sends through the unary Check RPC.
const CHECK_SCENARIOS = new Set(['ex07_generic_block', 'ex13_unknown_tool', 'ex17_guard_abort', 'ex23_reject_bad_events']);

/** @type {Map<string, import('./support/daemon.js').Daemon>} */
const daemons = new Map();
/** @type {Map<string, unknown>} why the daemon of a config did not start */
const failures = new Map();

before(async () => {
  // One daemon per distinct scenario config, started side by side. A daemon that does not start
  // (a config it refuses) fails the variants that need it, not every variant, as in the Go runner.
  const configs = new Map(VARIANTS.map((v) => [v.configKey, v.config]));
  await Promise.all([...configs].map(async ([key, config]) => {
    try {
      daemons.set(key, await startDaemon(config));
    } catch (err) {
      failures.set(key, err);
    }
  }));
});

/** The daemon started for the variant's config; fails the test when it did not start. @param {{configKey: string}} variant */
function daemonFor(variant) {
  const daemon = daemons.get(variant.configKey);
  if (!daemon) assert.fail(`no daemon for config ${variant.configKey}: ${failures.get(variant.configKey)}`);
  return daemon;
}

after(async () => {
  await Promise.all([...daemons.values()].map((d) => d.stop()));
});

test('the scenario data is there', () => {
  assert.ok(VARIANTS.length >= 20, `only ${VARIANTS.length} variants found`);
});

describe('over an Evaluate stream', () => {
  for (const variant of VARIANTS) {
    test(variant.id, async () => {
      const client = new LoopwardenClient(daemonFor(variant).grpcTarget);
      try {
        for (const event of expand(variant)) {
          const [raw] = await client.evaluate([event.message]);
          const verdict = protoNames(raw);
          const where = `${variant.id} seq ${event.seq}`;
          assert.deepStrictEqual([verdict.seq, verdict.run_id], [event.seq, event.runId.trim()], where);
          check(event.expect, verdict, where);
        }
      } finally {
        client.close();
      }
    });
  }
});

describe('over unary Check', () => {
  for (const variant of VARIANTS.filter((v) => CHECK_SCENARIOS.has(v.scenario))) {
    test(variant.id, async () => {
      const client = new LoopwardenClient(daemonFor(variant).grpcTarget);
      try {
        for (const event of expand(variant)) {
          const message = { ...event.message, runId: event.message.runId.replace(variant.id, `${variant.id}/check`) };
          check(event.expect, protoNames(await client.check(message)), `check ${variant.id} seq ${event.seq}`);
        }
      } finally {
        client.close();
      }
    });
  }
});
