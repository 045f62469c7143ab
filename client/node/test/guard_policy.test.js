// @ts-check
// The guard-policy table (tests/conformance/guard/policy.json) through guardTool: each scenario's
// verdict comes in where the daemon's would (the client's toolCall), decoded by the client's own
// verdictFromMessage; guardTool does the rest, with its default warning handler (console.warn)
// and, where the scenario can ask, an onAsk that says no.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { RunAborted, blockedToolResult, guardTool, verdictFromMessage } from '../src/index.js';
import { compared, loadScenarios, verdictMessage } from './support/guard_policy.js';

/** @param {string} runId @returns {import('../src/index.js').Verdict} */
const allowed = (runId) => verdictFromMessage({ seq: 0, runId, action: 'ACTION_ALLOW', detector: 'DETECTOR_UNSPECIFIED', level: 'LEVEL_UNSPECIFIED', count: 0, message: '', announce: false, errorCode: '', toolName: '' });

describe('guard policy', () => {
  for (const scenario of loadScenarios()) {
    test(`guard policy: ${scenario.name}`, async () => {
      const verdict = verdictFromMessage(verdictMessage(scenario, 'run'));
      /** @type {unknown[]} */
      const outcomes = [];
      const client = /** @type {any} */ ({
        toolCall: async () => verdict,
        toolOutcome: async (/** @type {string} */ runId, /** @type {string} */ _tool, /** @type {unknown} */ _params, /** @type {any} */ opts) => {
          outcomes.push(opts.result);
          return allowed(runId);
        },
        approval: async (/** @type {string} */ runId) => allowed(runId),
      });
      /** @type {string[]} */
      const asked = [];
      /** @type {string[]} */
      const warned = [];
      let ran = false;
      const read = guardTool(client, 'run', 'read', async () => { ran = true; return 'contents'; }, {
        toolCallId: 'c1',
        onAsk: scenario.can_ask ? (v) => { asked.push(v.message); return false; } : undefined,
      });
      const warn = console.warn;
      console.warn = (/** @type {string} */ line) => { warned.push(String(line).replace(/^loopwarden: /, '')); };
      /** @type {import('./support/guard_policy.js').Seen} */
      let seen;
      try {
        const result = /** @type {any} */ (await read({ path: '/x' }));
        if (asked.length) seen = { effect: 'ask', text: asked[0] };
        else if (ran) seen = warned.length ? { effect: 'run_with_warning', text: warned[0] } : { effect: 'run' };
        else seen = { effect: 'refuse', text: result.content[0].text };
      } catch (err) {
        if (!(err instanceof RunAborted)) throw err;
        seen = { effect: 'end_run', text: err.message };
      } finally {
        console.warn = warn;
      }
      const blocked = blockedToolResult(verdict);
      seen.reported = outcomes.some((o) => JSON.stringify(o) === JSON.stringify(blocked));
      const { want, got } = compared(scenario, seen);
      assert.deepStrictEqual(got, want);
    });
  }
});
