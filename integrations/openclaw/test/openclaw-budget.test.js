// @ts-check
// Token budgets fed by OpenClaw's llm_output: `openclaw agent --local`, two messages in one session,
// a scripted model whose responses report their token usage, against a real daemon with
// loopwarden.budgets.tokensPerTree. OpenClaw sends llm_output once per attempt, after its model and
// tool calls, so the first message's run spends the budget and the second message's first tool call
// is the one stopped (ABORT budget_exhausted: blocked, and OpenClaw's run ended). Without the conversation-access grant the plugin
// registers no llm_output hook: no token is counted and the second run's call runs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { LoopwardenClient } from '@loopwarden/client';
import { startDaemon } from './support/daemon.js';
import { startFakeModel } from './support/fake-model.js';
import { AGENT_TIMEOUT_MS, openclaw, openclawHome } from './support/openclaw-cli.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */

const CAP = 100;
const USAGE = { prompt_tokens: 40, completion_tokens: 10 }; // 50 per response: 3 responses pass the cap
const GRANT = { hooks: { allowConversationAccess: true } };

/**
 * Two messages in one session; the tool results the model read in each.
 * @param {Daemon} daemon @param {Record<string, unknown>} entry @param {string} session
 */
async function twoMessages(daemon, entry, session) {
  const model = await startFakeModel({ tool: 'read', args: { path: 'notes.txt' }, calls: 2, perTurn: true, usage: USAGE });
  const home = openclawHome(model.baseUrl, daemon.grpcTarget, entry);
  try {
    const args = ['agent', '--local', '--session-id', session, '--json'];
    const first = await openclaw(home, [...args, '--message', 'Read notes.txt twice.']);
    const firstResults = model.toolResults();
    const second = await openclaw(home, [...args, '--message', 'Read notes.txt twice more.']);
    const secondResults = model.toolResults();
    return { first, firstResults, second, secondResults };
  } finally {
    await model.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

describe('openclaw agent --local: llm_output usage reaches tokensPerTree', () => {
  /** @type {Daemon} */
  let daemon;
  before(async () => {
    daemon = await startDaemon({ tools: { loopDetection: { enabled: false } }, loopwarden: { budgets: { tokensPerTree: CAP } } });
  });
  after(async () => {
    await daemon?.stop();
  });

  test('with conversation access, the run that spent tokensPerTree leaves the next run\'s first tool call stopped by budget_exhausted', { timeout: 2 * AGENT_TIMEOUT_MS + 30_000 }, async () => {
    const runs = await twoMessages(daemon, GRANT, 'lw-budget');
    const shown = JSON.stringify({ first: runs.firstResults, second: runs.secondResults, stderr: runs.second.stderr.slice(-4000) }, null, 2);
    assert.equal(0, runs.first.code, shown);
    assert.equal(2, runs.firstResults.filter((text) => /line 1/.test(text)).length, shown);
    // The second run's first read is blocked and the run ended: no read ran, and OpenClaw reports
    // the run aborted (the CLI's own failure line).
    assert.equal(0, runs.secondResults.filter((text) => /line 1/.test(text)).length, shown);
    assert.match(runs.second.stderr, /run lw-budget aborted \(budget_exhausted\)/, shown);
    assert.match(runs.second.stderr, /agent run aborted/, shown);
    const inspector = new LoopwardenClient(daemon.grpcTarget);
    try {
      const view = await inspector.inspect('lw-budget');
      const tokens = view.treeTotals.inputTokens + view.treeTotals.outputTokens;
      assert.ok(tokens > CAP, JSON.stringify(view.treeTotals));
      assert.deepEqual([true, 'budget_exhausted'], [view.aborted, view.abortErrorCode]);
    } finally {
      inspector.close();
    }
  });

  test('without conversation access no token is counted: the next run\'s tool calls run', { timeout: 2 * AGENT_TIMEOUT_MS + 30_000 }, async () => {
    const runs = await twoMessages(daemon, {}, 'lw-no-grant');
    const shown = JSON.stringify({ second: runs.secondResults, stderr: runs.second.stderr.slice(-4000) }, null, 2);
    assert.equal(0, runs.second.code, shown);
    assert.equal(2, runs.secondResults.filter((text) => /line 1/.test(text)).length, shown);
    assert.doesNotMatch(runs.first.stderr + runs.second.stderr, /typed hook "llm_output" blocked/, 'the plugin registers no hook it may not have');
  });
});
