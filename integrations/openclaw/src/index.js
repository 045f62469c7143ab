// @ts-check
/**
 * loopwarden as an OpenClaw plugin: registers before_tool_call (BLOCK and ABORT block the call,
 * ASK asks a person through OpenClaw's requireApproval), after_tool_call, after_compaction,
 * session_end, subagent_spawned (a sub-agent's session is a child run) and llm_output (a run's
 * answer and usage: the detectors of loops without tool calls, the token budgets), plus
 * tool-result middleware that hands an announced warning to the model. Configured at
 * `plugins.entries.loopwarden.config`.
 */
import { LoopwardenClient } from '@loopwarden/client';
import { PLUGIN_ID, parseSettings } from './config.js';
import { createHooks, sharedMemory } from './hooks.js';

export { DEFAULT_SETTINGS, PluginConfigError, parseSettings } from './config.js';
export { createHooks, createMemory, sharedMemory } from './hooks.js';

/** @typedef {import('openclaw/plugin-sdk/plugin-entry').OpenClawPluginApi} OpenClawPluginApi */
/** @typedef {import('openclaw/plugin-sdk/plugin-entry').OpenClawPluginDefinition} OpenClawPluginDefinition */
/** @typedef {import('./config.js').PluginSettings} PluginSettings */
/** @typedef {import('./hooks.js').DaemonClient} DaemonClient */

/**
 * @typedef {object} PluginOptions what a test or an embedding host may replace
 * @property {(settings: Readonly<PluginSettings>) => DaemonClient & { close(): void }} [createClient]
 * @property {(sessionId: string) => boolean | Promise<boolean>} [abortRun] ends OpenClaw's run of a session
 */

/** @param {Readonly<PluginSettings>} settings */
function connect(settings) {
  // The daemon counts verdicts by integration: without the header they are all `grpc`.
  return new LoopwardenClient(settings.target, {
    token: settings.token || undefined, timeoutMs: settings.timeoutMs, metadata: { 'x-loopwarden-integration': 'openclaw' },
  });
}

/**
 * The only way OpenClaw's SDK offers a plugin to end a run: `abortAgentHarnessRun(sessionId)`.
 * Imported when first needed, from the OpenClaw that loaded this plugin.
 * @param {string} sessionId
 */
async function abortOpenClawRun(sessionId) {
  const { abortAgentHarnessRun } = await import('openclaw/plugin-sdk/agent-harness-runtime');
  return abortAgentHarnessRun(sessionId);
}

/**
 * A child session's parent from OpenClaw's session store (`parentSessionKey`, else `spawnedBy`,
 * and `parentSessionId`), through the runtime the plugin API hands a plugin.
 * @param {OpenClawPluginApi} api
 * @returns {import('./hooks.js').SessionParentLookup}
 */
function storedSessionParent(api) {
  return ({ agentId, sessionKey }) => {
    const entry = api.runtime?.agent?.session?.getSessionEntry?.({ agentId, sessionKey });
    if (!entry) return undefined;
    return { parentSessionKey: entry.parentSessionKey ?? entry.spawnedBy, parentSessionId: entry.parentSessionId };
  };
}

/**
 * Whether OpenClaw lets this plugin read conversation content (`plugins.entries.loopwarden.hooks.
 * allowConversationAccess: true`), which its llm_output hook needs.
 * @param {OpenClawPluginApi} api
 */
function conversationAccess(api) {
  return api.config?.plugins?.entries?.[PLUGIN_ID]?.hooks?.allowConversationAccess === true;
}

/**
 * @param {PluginOptions} [options]
 * @returns {OpenClawPluginDefinition}
 */
export function createLoopwardenPlugin(options = {}) {
  return {
    id: PLUGIN_ID,
    name: 'loopwarden',
    description: 'Tool-loop detection by the loopwarden daemon.',
    register(api) {
      const settings = parseSettings(api.pluginConfig);
      const client = (options.createClient ?? connect)(settings);
      // OpenClaw registers the plugin more than once per process and may call the tool hooks on
      // one registration and the middleware on another: they share one memory (hooks.js).
      const memory = sharedMemory(JSON.stringify([settings.target, settings.agentId]));
      const hooks = createHooks({
        client, settings, logger: api.logger, abortRun: options.abortRun ?? abortOpenClawRun,
        sessionParent: storedSessionParent(api), memory,
      });
      api.on('before_tool_call', (event, ctx) => hooks.beforeToolCall(event, ctx));
      api.on('after_tool_call', (event, ctx) => hooks.afterToolCall(event, ctx));
      api.on('after_compaction', (event, ctx) => hooks.afterCompaction(event, ctx));
      api.on('session_end', (event, ctx) => hooks.sessionEnd(event, ctx));
      api.on('subagent_spawned', (event, ctx) => hooks.subagentSpawned(event, ctx));
      if (conversationAccess(api)) {
        // OpenClaw hands a non-bundled plugin a run's output only with this grant; without it the
        // registration would be refused with a warning on every start.
        api.on('llm_output', (event, ctx) => hooks.llmOutput(event, ctx));
      }
      if (settings.warnings === 'tool-result') {
        // NOTE: OpenClaw accepts this only from an explicitly enabled plugin whose manifest
        // declares contracts.agentToolResultMiddleware; otherwise it records a diagnostic and
        // the warning still reaches the gateway log.
        api.registerAgentToolResultMiddleware((event, ctx) => hooks.toolResultMiddleware(event, ctx),
          { runtimes: ['openclaw', 'codex'] });
      }
      let closed = false;
      const close = () => {
        if (!closed) client.close();
        closed = true;
      };
      api.lifecycle?.onDispose?.(close);
      api.on('gateway_stop', close);
    },
  };
}

export default createLoopwardenPlugin();
