// @ts-check
// The real OpenClaw, without a model: its plugin loader loads this directory as a local plugin
// (plugins.load.paths, the way `openclaw plugins install --link` does), and the agent-harness SDK
// that harness plugins use drives a tool through OpenClaw's own before_tool_call wrapper,
// tool-result middleware, after_tool_call, after_compaction and session_end dispatch.
//
// NOTE: loadOpenClawPlugins, the global hook runner and the embedded approval broker are OpenClaw
// internals (dist/*, not in the package's exports); they are pinned by package-lock.json, and this
// is the only file that reaches for them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PLUGIN_DIR = fileURLToPath(new URL('../..', import.meta.url));
const OPENCLAW_DIST = path.join(PLUGIN_DIR, 'node_modules', 'openclaw', 'dist');

/** @typedef {{ level: string, message: string }} LogLine */

/**
 * @typedef {object} OpenClawHost
 * @property {any} registry what the loader registered
 * @property {LogLine[]} logs everything OpenClaw and the plugin logged
 * @property {typeof import('openclaw/plugin-sdk/agent-harness-runtime')} harness
 * @property {any} hookRunner OpenClaw's global hook runner
 * @property {(scope: Scope, toolName: string, params: Record<string, unknown>, run: () => unknown) => Promise<any>} callTool
 */

/** @typedef {{ runId: string, sessionId: string, sessionKey: string, agentId: string }} Scope */

let callNumber = 0;

/**
 * Load this plugin with OpenClaw's loader, as an explicitly enabled, allow-listed local plugin.
 * OpenClaw's state (its plugin registry database, captured plugin sources) goes to a fresh
 * directory, so nothing is read from or written to ~/.openclaw.
 * @param {Record<string, unknown>} pluginConfig `plugins.entries.loopwarden.config`
 * @returns {Promise<OpenClawHost>}
 */
export async function loadWithOpenClaw(pluginConfig) {
  const state = fs.mkdtempSync(path.join(os.tmpdir(), 'openclaw-state-'));
  process.env.OPENCLAW_STATE_DIR = state;
  const { loadOpenClawPlugins } = await import(path.join(OPENCLAW_DIST, 'plugins', 'loader.js'));
  const { getGlobalHookRunner } = await import(path.join(OPENCLAW_DIST, 'plugins', 'hook-runner-global.js'));
  const harness = await import('openclaw/plugin-sdk/agent-harness-runtime');
  /** @type {LogLine[]} */
  const logs = [];
  /** @param {string} level */
  const log = (level) => (/** @type {string} */ message) => { logs.push({ level, message }); };
  const config = {
    // The plugin replaces the built-in detector: both guardrails off (README.md).
    tools: { loopDetection: { enabled: false } },
    plugins: {
      allow: ['loopwarden'],
      load: { paths: [PLUGIN_DIR] },
      entries: { loopwarden: { enabled: true, config: pluginConfig } },
    },
  };
  const registry = await loadOpenClawPlugins({
    config,
    env: { ...process.env, OPENCLAW_STATE_DIR: state },
    logger: { debug: () => {}, info: log('info'), warn: log('warn'), error: log('error') },
    activate: true,
    cache: false,
    throwOnLoadError: true,
    onlyPluginIds: ['loopwarden'],
  });
  const hookRunner = getGlobalHookRunner();

  /**
   * One tool call the way OpenClaw's runner makes it. A call OpenClaw refuses with a failure
   * rather than a veto (a denied or unroutable approval) throws from the wrapped tool; the runner
   * then reports the error to after_tool_call and hands the model the error text, as done here.
   * @type {OpenClawHost['callTool']}
   */
  async function callTool(scope, toolName, params, run) {
    const toolCallId = `oc_call_${++callNumber}`;
    const tool = {
      name: toolName,
      label: toolName,
      description: `test tool ${toolName}`,
      parameters: { type: 'object', properties: {}, additionalProperties: true },
      execute: async () => run(),
    };
    const wrapped = harness.wrapToolWithBeforeToolCallHook(/** @type {any} */ (tool), { ...scope });
    let result;
    try {
      result = await /** @type {any} */ (wrapped).execute(toolCallId, params);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      await harness.runAgentHarnessAfterToolCallHook({ toolName, toolCallId, ...scope, startArgs: params, error });
      return { content: [{ type: 'text', text: error }], details: { status: 'error', error } };
    }
    const middleware = harness.createAgentToolResultMiddlewareRunner({ runtime: 'openclaw', ...scope });
    result = await middleware.applyToolResultMiddleware({ toolCallId, toolName, args: params, result });
    await harness.runAgentHarnessAfterToolCallHook({ toolName, toolCallId, ...scope, startArgs: params, result });
    return result;
  }

  return { registry, logs, harness, hookRunner, callTool };
}

/**
 * Wait until `predicate` holds (for work the plugin schedules after a hook has answered).
 * @param {() => boolean} predicate @param {number} [ms]
 */
export async function eventually(predicate, ms = 5000) {
  const until = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return true;
}

/**
 * The named exports of the OpenClaw chunk that holds `region` (a source file of OpenClaw's, e.g.
 * `src/infra/embedded-mode.ts`). OpenClaw's build gives chunks hashed names and one-letter export
 * aliases, so both are read off the built files instead of spelt here.
 * @param {string} prefix the chunk's file name up to its hash @param {string} region
 * @returns {Promise<Record<string, any>>}
 */
async function openclawChunk(prefix, region) {
  const name = fs.readdirSync(OPENCLAW_DIST).find((file) => file.startsWith(prefix) && file.endsWith('.mjs')
    && fs.readFileSync(path.join(OPENCLAW_DIST, file), 'utf8').includes(`//#region ${region}`));
  if (!name) throw new Error(`no OpenClaw chunk ${prefix}* holds ${region}`);
  const file = path.join(OPENCLAW_DIST, name);
  const exportLine = fs.readFileSync(file, 'utf8').split('\n').findLast((line) => line.startsWith('export {')) ?? '';
  const module = await import(file);
  /** @type {Record<string, any>} */
  const named = {};
  for (const [, local, alias] of exportLine.matchAll(/(\w+) as (\w+)/g)) named[local] = module[alias];
  return named;
}

/**
 * @typedef {object} ApprovalRequestRecord what OpenClaw showed a person
 * @property {string} id
 * @property {{ title: string, description: string, severity?: string, toolName?: string, toolCallId?: string,
 *   pluginId?: string, allowedDecisions?: string[] }} request
 * @property {number} createdAtMs
 * @property {number} expiresAtMs
 */

/**
 * OpenClaw's own approval surface for an embedded host (the one its TUI's local mode installs):
 * embedded mode on and an EmbeddedPluginApprovalBroker in place, so a plugin's requireApproval is
 * shown to it instead of a gateway. Each request is answered with the next scripted decision
 * ('allow-once' | 'allow-always' | 'deny'; null: never answered, so OpenClaw's timeout decides).
 * @param {(string | null)[]} decisions
 */
export async function embeddedApprovals(decisions) {
  const mode = await openclawChunk('embedded-mode-', 'src/infra/embedded-mode.ts');
  const approvals = await openclawChunk('agent-tools.before-tool-call-', 'src/infra/embedded-plugin-approval-broker.ts');
  const broker = new approvals.EmbeddedPluginApprovalBroker();
  /** @type {ApprovalRequestRecord[]} */
  const requests = [];
  broker.subscribe((/** @type {{ event: string, payload: any }} */ { event, payload }) => {
    if (event !== 'plugin.approval.requested') return;
    requests.push(payload);
    const decision = decisions.shift();
    if (decision) setImmediate(() => broker.resolve(payload.id, decision));
  });
  mode.setEmbeddedMode(true);
  approvals.setEmbeddedPluginApprovalBroker(broker);
  return {
    requests,
    stop() {
      approvals.clearEmbeddedPluginApprovalBroker(broker);
      broker.stop();
      mode.setEmbeddedMode(false);
    },
  };
}
