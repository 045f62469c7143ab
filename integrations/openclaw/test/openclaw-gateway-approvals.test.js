// @ts-check
// ASK through a real OpenClaw gateway (`openclaw gateway run`), answered from OpenClaw's own CLI
// (`openclaw approvals pending` / `openclaw approvals resolve`), against a real daemon with
// loopwarden.onCritical "ask" and a scripted model. Where OpenClaw routes the plugin's
// requireApproval decides whether that CLI can see it:
// - a run started from a gateway client that can show approvals (here OpenClaw's own TUI client,
//   connected to the gateway): the approval is a pending `plugin:` record in the gateway, listed
//   by `openclaw approvals pending` and answered by `openclaw approvals resolve`;
// - a run started by `openclaw agent` (non-interactive, even through the gateway): OpenClaw
//   refuses the approval before it reaches the gateway ("Plugin approval unavailable:
//   non-interactive CLI runs have no approval-capable initiating surface"), so there is nothing
//   to list or answer, and the plugin reports a denial.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { DETECTION_ON, loopwardenCommand, metricValue, startDaemon } from './support/daemon.js';
import { startFakeModel } from './support/fake-model.js';
import { PLUGIN_DIR } from './support/openclaw-host.js';

/** @typedef {import('./support/daemon.js').Daemon} Daemon */
/** @typedef {import('./support/fake-model.js').FakeModel} FakeModel */

const OPENCLAW = path.join(PLUGIN_DIR, 'node_modules', 'openclaw', 'openclaw.mjs');
const TUI = path.join(PLUGIN_DIR, 'test', 'support', 'gateway-tui.js');
const STEP_TIMEOUT_MS = 180_000;
const TOKEN = 'loopwarden-test-gateway-token';
const MESSAGE = 'Read notes.txt until it changes.';

/** OpenClaw's environment for a HOME: none of the test runner's OPENCLAW_ or LOOPWARDEN_ variables. @param {string} home */
function envFor(home) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENCLAW_') && !k.startsWith('LOOPWARDEN_')));
  return { ...env, HOME: home };
}

/** @returns {Promise<number>} */
async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {net.AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(() => resolve(undefined)));
  return port;
}

/**
 * One OpenClaw CLI command to completion.
 * @param {string} home @param {string[]} args
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string }>}
 */
function openclaw(home, args) {
  const child = spawn(process.execPath, [OPENCLAW, ...args], { cwd: home, env: envFor(home), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => { stdout += chunk; });
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const timer = setTimeout(() => child.kill('SIGKILL'), STEP_TIMEOUT_MS);
  return new Promise((resolve) => child.once('close', (code) => {
    clearTimeout(timer);
    resolve({ code, stdout, stderr });
  }));
}

/**
 * A long-running child (the gateway, the TUI client) whose output lines are kept; `until` waits
 * for a line.
 * @param {string} home @param {string[]} args
 */
function background(home, args) {
  const child = spawn(process.execPath, args, { cwd: home, env: envFor(home), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  /** @type {string[]} */
  const lines = [];
  /** @type {(() => void)[]} */
  const waiters = [];
  for (const stream of [child.stdout, child.stderr]) {
    readline.createInterface({ input: stream }).on('line', (line) => {
      lines.push(line);
      for (const wake of waiters.splice(0)) wake();
    });
  }
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    lines,
    /** @param {(line: string) => boolean} match @returns {Promise<string>} */
    async until(match) {
      const deadline = Date.now() + STEP_TIMEOUT_MS;
      for (;;) {
        const found = lines.find(match);
        if (found) return found;
        if (child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`never printed the line waited for (exit ${child.exitCode}):\n${lines.slice(-60).join('\n')}`);
        }
        await new Promise((resolve) => { waiters.push(() => resolve(undefined)); setTimeout(resolve, 500); });
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null && child.pid) {
        process.kill(-child.pid, 'SIGTERM');
        const timer = setTimeout(() => { if (child.pid) process.kill(-child.pid, 'SIGKILL'); }, 15_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/** The JSON events gateway-tui.js printed. @param {string[]} lines @returns {{ event: string, payload: any }[]} */
function tuiEvents(lines) {
  return lines.filter((line) => line.startsWith('{"event"')).map((line) => JSON.parse(line));
}

/** @param {string} address @returns {Promise<{ agent_id: string, tool_name: string, run_id: string }[]>} */
async function exemptionsList(address) {
  const [cmd, ...prefix] = loopwardenCommand();
  const { stdout } = await promisify(execFile)(cmd, [...prefix, 'exemptions', 'list', '--json', '--address', address]);
  return JSON.parse(stdout);
}

describe('ASK through an OpenClaw gateway, answered with `openclaw approvals`', () => {
  /** @type {Daemon} */
  let daemon;
  /** @type {FakeModel} */
  let model;
  /** @type {string} */
  let home;
  /** @type {ReturnType<typeof background> | undefined} */
  let gateway;
  /** @type {ReturnType<typeof background> | undefined} */
  let tui;
  before(async () => {
    // OpenClaw's default agent is `main`: its own thresholds make the 5th identical read critical.
    daemon = await startDaemon({ ...DETECTION_ON, loopwarden: { onCritical: 'ask' }, agents: { list: [...DETECTION_ON.agents.list,
      { id: 'main', tools: { loopDetection: { warningThreshold: 2, criticalThreshold: 4 } } }] } });
    model = await startFakeModel({ tool: 'read', args: { path: 'notes.txt' }, calls: 6 });
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'openclaw-gateway-'));
    const workspace = path.join(home, 'workspace');
    fs.mkdirSync(workspace, { recursive: true });
    fs.writeFileSync(path.join(workspace, 'notes.txt'), 'line 1\nline 2\n');
    const port = await freePort();
    const config = {
      gateway: { mode: 'local', port, bind: 'loopback', auth: { mode: 'token', token: TOKEN } },
      tools: { loopDetection: { enabled: false } },
      models: {
        mode: 'replace',
        providers: {
          fake: {
            baseUrl: model.baseUrl, apiKey: 'fake-key', api: 'openai-completions',
            models: [{ id: 'fake-model', name: 'Fake model', reasoning: false, input: ['text'],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }],
          },
        },
      },
      agents: { defaults: { model: { primary: 'fake/fake-model' }, workspace } },
      plugins: { load: { paths: [PLUGIN_DIR] }, entries: { loopwarden: { enabled: true, config: { target: daemon.grpcTarget } } } },
    };
    fs.mkdirSync(path.join(home, '.openclaw'), { recursive: true });
    fs.writeFileSync(path.join(home, '.openclaw', 'openclaw.json'), JSON.stringify(config, null, 2));
    gateway = background(home, [OPENCLAW, 'gateway', 'run', '--port', String(port)]);
    // The gateway colours its log lines even into a pipe.
    await gateway.until((line) => /\[gateway\] ready$/.test(line.replace(/\x1b\[[0-9;]*m/g, '')));
  });
  after(async () => {
    await tui?.stop();
    await gateway?.stop();
    await model?.close();
    await daemon?.stop();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  test('`openclaw agent` through the gateway: OpenClaw refuses the approval before the gateway, so `openclaw approvals pending` has nothing, and the daemon takes it as a denial',
    { timeout: 2 * STEP_TIMEOUT_MS }, async () => {
      const denied = await metricValue(daemon.metricsAddress, 'loopwarden_approvals_total', { answer: 'denied', agent: 'main' });
      const run = await openclaw(home, ['agent', '--agent', 'main', '--session-id', 'lw-gateway-cli', '--message', MESSAGE, '--json']);
      const results = model.toolResults();
      const shown = JSON.stringify({ code: run.code, results, stderr: run.stderr.slice(-3000) }, null, 2);
      assert.equal(0, run.code, shown);
      assert.match(results[4] ?? '', /Plugin approval unavailable: non-interactive CLI runs have no approval-capable initiating surface/, shown);
      const pending = await openclaw(home, ['approvals', 'pending', '--json']);
      assert.equal(0, pending.code, pending.stderr);
      assert.deepEqual([], JSON.parse(pending.stdout).approvals);
      assert.equal(denied + 1, await metricValue(daemon.metricsAddress, 'loopwarden_approvals_total', { answer: 'denied', agent: 'main' }));
      // The gateway's log says why, next to the call's name.
      await gateway?.until((line) => /loopwarden: read in run .*: OpenClaw could not ask anyone/.test(line));
    });

  test('a run from a gateway client that shows approvals (OpenClaw\'s TUI client): `openclaw approvals pending` lists the ASK, `openclaw approvals resolve … allow-always` runs the call and makes the exemption',
    { timeout: 2 * STEP_TIMEOUT_MS }, async () => {
      const sessionKey = 'agent:main:lw-gateway-tui';
      tui = background(home, [TUI, sessionKey, MESSAGE]);
      await tui.until((line) => line.includes('"event":"plugin.approval.requested"'));
      const [requested] = tuiEvents(tui.lines).filter((e) => e.event === 'plugin.approval.requested');
      assert.deepEqual({ pluginId: 'loopwarden', toolName: 'read', title: 'Loop guard: let read run again?' },
        { pluginId: requested.payload.request.pluginId, toolName: requested.payload.request.toolName, title: requested.payload.request.title });

      const pending = await openclaw(home, ['approvals', 'pending', '--json']);
      assert.equal(0, pending.code, pending.stderr);
      const listed = JSON.parse(pending.stdout).approvals;
      assert.deepEqual([{ id: requested.payload.id, kind: 'plugin', agentId: 'main', sessionKey }],
        listed.map((/** @type {any} */ a) => ({ id: a.id, kind: a.kind, agentId: a.agentId, sessionKey: a.sessionKey })), pending.stdout);
      assert.match(listed[0].summary, /Loop guard: let read run again\?: CRITICAL: .*identical/);

      const resolved = await openclaw(home, ['approvals', 'resolve', requested.payload.id, 'allow-always']);
      assert.equal(0, resolved.code, resolved.stdout + resolved.stderr);
      assert.match(resolved.stdout, /resolved allow-always/);
      await tui.until((line) => line.includes('"event":"chat"'));
      const results = model.toolResults();
      assert.equal(6, results.length, JSON.stringify(results));
      assert.match(results[4], /^line 1/, `the asked call ran once allowed: ${JSON.stringify(results)}`);
      assert.match(results[5], /^line 1/, `and the next identical call ran under the exemption: ${JSON.stringify(results)}`);
      assert.equal(1, tuiEvents(tui.lines).filter((e) => e.event === 'plugin.approval.requested').length, 'asked once');

      const exemptions = await exemptionsList(daemon.grpcTarget);
      assert.deepEqual([['main', 'read']], exemptions.map((e) => [e.agent_id, e.tool_name]), JSON.stringify(exemptions));
    });
});
