// @ts-check
// The real OpenClaw, without a model: its plugin loader loads this directory as a local plugin
// (plugins.load.paths, the way `openclaw plugins install --link` does), and the agent-harness SDK
// that harness plugins use drives a tool through OpenClaw's own before_tool_call wrapper,
// tool-result middleware, after_tool_call, after_compaction and session_end dispatch.
//
// NOTE: loadOpenClawPlugins and the global hook runner are OpenClaw internals (dist/plugins/*, not
// in the package's exports); they are pinned by package-lock.json, and this is the only file that
// reaches for them.
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

  /** @type {OpenClawHost['callTool']} */
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
    let result = await /** @type {any} */ (wrapped).execute(toolCallId, params);
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
