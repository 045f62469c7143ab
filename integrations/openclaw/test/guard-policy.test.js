// @ts-check
// The guard-policy table (tests/conformance/guard/policy.json) through the plugin's hooks: each
// scenario's verdict is what the daemon client hands before_tool_call (decoded by the client's
// own verdictFromMessage), and the hooks do the rest, in OpenClaw's order: before_tool_call, the
// tool (or OpenClaw's blocked result), the tool-result middleware, after_tool_call. The plugin's
// default settings; `ask` is the scenario's. The table's `outputs` go through llm_output, a run's
// answer: an ABORT ends the OpenClaw run, an announced WARN is logged.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { blockedToolResult, verdictFromMessage } from '@loopwarden/client';
import { parseSettings } from '../src/config.js';
import { createHooks } from '../src/hooks.js';
import { compared, loadOutputScenarios, loadScenarios, verdictMessage } from '../../../client/node/test/support/guard_policy.js';
import { openclawBlockedResult } from './support/host.js';

/** @param {string} runId */
const allowed = (runId) => verdictFromMessage({ seq: 0, runId, action: 'ACTION_ALLOW', detector: 'DETECTOR_UNSPECIFIED', level: 'LEVEL_UNSPECIFIED', count: 0, message: '', announce: false, errorCode: '', toolName: '' });

describe('guard policy', () => {
  for (const scenario of loadScenarios()) {
    test(`guard policy: ${scenario.name}`, async () => {
      const runId = 'run-1';
      const verdict = verdictFromMessage(verdictMessage(scenario, runId));
      /** @type {unknown[]} */
      const outcomes = [];
      /** @type {string[]} */
      const ended = [];
      const client = /** @type {any} */ ({
        toolCall: async () => verdict,
        toolOutcome: async (/** @type {string} */ id, /** @type {string} */ _tool, /** @type {unknown} */ _params, /** @type {any} */ opts) => {
          outcomes.push(opts.result);
          return allowed(id);
        },
        userTurn: async (/** @type {string} */ id) => allowed(id),
        approval: async (/** @type {string} */ id) => allowed(id),
        compactionRetry: async (/** @type {string} */ id) => allowed(id),
        runEnd: async (/** @type {string} */ id) => allowed(id),
      });
      const silent = () => {};
      const hooks = createHooks({
        client, settings: parseSettings({ ask: Boolean(scenario.can_ask) }, {}),
        logger: { debug: silent, info: silent, warn: silent, error: silent },
        abortRun: (sessionId) => { ended.push(sessionId); return true; },
      });
      const params = { path: '/x' };
      const ctx = { toolName: 'read', toolCallId: 'c1', runId, sessionId: 'session-1', sessionKey: 'agent:coder:s1', agentId: 'coder' };
      const decision = await hooks.beforeToolCall({ toolName: 'read', params, runId, toolCallId: 'c1' }, ctx);
      await new Promise((resolve) => setImmediate(resolve)); // the run is ended after the hook answers
      /** @type {import('../../../client/node/test/support/guard_policy.js').Seen} */
      let seen;
      let result = /** @type {{ content: { type: 'text', text: string }[], details: unknown }} */ ({ content: [{ type: 'text', text: 'contents' }], details: {} });
      if (decision?.requireApproval) {
        seen = { effect: 'ask', text: decision.requireApproval.description };
      } else if (decision?.block) {
        seen = { effect: ended.length ? 'end_run' : 'refuse', text: decision.blockReason ?? '' };
        result = openclawBlockedResult(decision.blockReason ?? '');
      } else {
        const delivered = hooks.toolResultMiddleware({ toolCallId: 'c1', toolName: 'read', args: params, result },
          { runtime: 'openclaw', runId, sessionId: ctx.sessionId, sessionKey: ctx.sessionKey, agentId: ctx.agentId });
        const added = delivered ? delivered.result.content.slice(result.content.length) : [];
        seen = added.length ? { effect: 'run_with_warning', text: /** @type {any} */ (added[0]).text } : { effect: 'run' };
      }
      if (!decision?.requireApproval) {
        await hooks.afterToolCall({ toolName: 'read', params, runId, toolCallId: 'c1', result }, ctx);
      }
      const blocked = JSON.stringify(blockedToolResult(verdict));
      seen.reported = outcomes.some((o) => JSON.stringify(o) === blocked);
      const { want, got } = compared(scenario, seen);
      assert.deepStrictEqual(got, want);
    });
  }
});

describe('guard policy of outputs', () => {
  for (const scenario of loadOutputScenarios()) {
    test(`guard policy output: ${scenario.name}`, async () => {
      const runId = 'session-1';
      const verdict = verdictFromMessage(verdictMessage(scenario, runId));
      /** @type {string[]} */
      const ended = [];
      /** @type {string[]} */
      const warned = [];
      const client = /** @type {any} */ ({
        modelOutput: async () => verdict,
        usage: async (/** @type {string} */ id) => allowed(id),
        userTurn: async (/** @type {string} */ id) => allowed(id),
        runEnd: async (/** @type {string} */ id) => allowed(id),
      });
      const silent = () => {};
      /** @type {string[]} */
      const errors = [];
      const hooks = createHooks({
        client, settings: parseSettings({}, {}),
        logger: { debug: silent, info: silent, warn: (/** @type {string} */ line) => { warned.push(line); },
          error: (/** @type {string} */ line) => { errors.push(line); } },
        abortRun: (sessionId) => { ended.push(sessionId); return true; },
      });
      const ctx = { runId: 'oc-run-1', sessionId: runId, sessionKey: 'agent:coder:s1', agentId: 'coder' };
      await hooks.llmOutput({ runId: 'oc-run-1', sessionId: runId, provider: 'fake', model: 'fake-model',
        assistantTexts: ['Done.'], usage: { input: 10, output: 5 } }, ctx);
      await new Promise((resolve) => setImmediate(resolve)); // the run is ended after the hook answers
      const prefix = `loopwarden: run ${runId}: `;
      const shown = warned.filter((line) => line.startsWith(prefix)).map((line) => line.slice(prefix.length));
      // The person reads the abort in the gateway log: `run <id> aborted (<code>): <message>; …`.
      const aborted = errors.map((line) => line.match(/aborted \(([^)]*)\): (.*?); ending/)).find(Boolean);
      /** @type {import('../../../client/node/test/support/guard_policy.js').Seen} */
      const seen = ended.length ? { effect: 'end_run', text: aborted ? aborted[2] || aborted[1] : '' }
        : shown.length ? { effect: 'run_with_warning', text: shown[0] } : { effect: 'run' };
      const { want, got } = compared(scenario, seen);
      assert.deepStrictEqual(got, want);
    });
  }
});
