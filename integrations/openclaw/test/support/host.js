// @ts-check
// A minimal stand-in for OpenClaw's plugin API: records what the plugin registers and drives the
// handlers the way OpenClaw's embedded runner does (before -> tool or blocked result ->
// tool-result middleware -> after), with payloads typed by OpenClaw's published plugin types.
import { createLoopwardenPlugin } from '../../src/index.js';

/** @typedef {import('../../src/openclaw.js').ToolCallEvent} ToolCallEvent */
/** @typedef {import('../../src/openclaw.js').ToolContext} ToolContext */
/** @typedef {import('../../src/openclaw.js').ToolResultEvent} ToolResultEvent */
/** @typedef {import('../../src/openclaw.js').BlockResult} BlockResult */
/** @typedef {import('../../src/openclaw.js').CompactionEvent} CompactionEvent */
/** @typedef {import('../../src/openclaw.js').AgentContext} AgentContext */
/** @typedef {import('../../src/openclaw.js').SessionEndEvent} SessionEndEvent */
/** @typedef {import('../../src/openclaw.js').SessionContext} SessionContext */
/** @typedef {import('../../src/openclaw.js').MiddlewareEvent} MiddlewareEvent */
/** @typedef {import('../../src/openclaw.js').MiddlewareContext} MiddlewareContext */
/** @typedef {import('../../src/openclaw.js').MiddlewareResult} MiddlewareResult */
/** @typedef {import('../../src/index.js').PluginOptions} PluginOptions */

/** @typedef {{ level: string, message: string }} LogLine */

/**
 * @typedef {object} LoadedPlugin
 * @property {string[]} hookNames the typed hooks registered, in order
 * @property {{ runtimes?: string[] }[]} middlewareOptions
 * @property {LogLine[]} logs
 * @property {(event: ToolCallEvent, ctx: ToolContext) => Promise<BlockResult | void>} beforeToolCall
 * @property {(event: ToolResultEvent, ctx: ToolContext) => Promise<void>} afterToolCall
 * @property {(event: CompactionEvent, ctx: AgentContext) => Promise<void>} afterCompaction
 * @property {(event: SessionEndEvent, ctx: SessionContext) => Promise<void>} sessionEnd
 * @property {((event: MiddlewareEvent, ctx: MiddlewareContext) => Promise<MiddlewareResult | void>) | undefined} middleware
 * @property {() => Promise<void>} dispose
 */

/**
 * Register the plugin against a recording API.
 * @param {Record<string, unknown>} pluginConfig `plugins.entries.loopwarden.config`
 * @param {PluginOptions} [options]
 * @param {Record<string, { parentSessionKey?: string, parentSessionId?: string, spawnedBy?: string }>} [sessionStore]
 *   what OpenClaw's session store holds, by session key (api.runtime.agent.session.getSessionEntry)
 * @returns {LoadedPlugin}
 */
export function loadPlugin(pluginConfig, options, sessionStore = {}) {
  /** @type {Map<string, (event: any, ctx: any) => any>} */
  const hooks = new Map();
  /** @type {string[]} */
  const hookNames = [];
  /** @type {LogLine[]} */
  const logs = [];
  /** @type {((event: any, ctx: any) => any) | undefined} */
  let middleware;
  /** @type {{ runtimes?: string[] }[]} */
  const middlewareOptions = [];
  /** @type {(() => void | Promise<void>)[]} */
  const disposers = [];
  /** @param {string} level */
  const log = (level) => (/** @type {string} */ message) => { logs.push({ level, message }); };
  const api = {
    id: 'loopwarden',
    name: 'loopwarden',
    source: 'test',
    registrationMode: 'full',
    pluginConfig,
    logger: { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') },
    runtime: { agent: { session: { getSessionEntry: (/** @type {{ sessionKey: string }} */ { sessionKey }) => sessionStore[sessionKey] } } },
    lifecycle: { onDispose: (/** @type {() => void} */ fn) => { disposers.push(fn); return () => {}; } },
    on: (/** @type {string} */ name, /** @type {(event: any, ctx: any) => any} */ handler) => {
      hookNames.push(name);
      hooks.set(name, handler);
    },
    registerAgentToolResultMiddleware: (/** @type {(event: any, ctx: any) => any} */ handler, /** @type {{ runtimes?: string[] }} */ opts) => {
      middleware = handler;
      middlewareOptions.push(opts);
    },
  };
  const plugin = createLoopwardenPlugin(options);
  plugin.register?.(/** @type {any} */ (api));
  /** @param {string} name */
  const hook = (name) => {
    const handler = hooks.get(name);
    if (!handler) throw new Error(`the plugin registered no ${name} hook`);
    return handler;
  };
  return {
    hookNames,
    middlewareOptions,
    logs,
    beforeToolCall: async (event, ctx) => hook('before_tool_call')(event, ctx),
    afterToolCall: async (event, ctx) => hook('after_tool_call')(event, ctx),
    afterCompaction: async (event, ctx) => hook('after_compaction')(event, ctx),
    sessionEnd: async (event, ctx) => hook('session_end')(event, ctx),
    middleware: middleware && (async (event, ctx) => /** @type {any} */ (middleware)(event, ctx)),
    dispose: async () => { for (const fn of disposers) await fn(); },
  };
}

/**
 * What OpenClaw hands the model for a call a before_tool_call hook blocked (its
 * buildBlockedToolResult in agent-tools.before-tool-call).
 * @param {string} reason
 */
export function openclawBlockedResult(reason) {
  return {
    content: [{ type: /** @type {const} */ ('text'), text: reason }],
    details: { status: 'blocked', deniedReason: 'plugin-before-tool-call', reason },
  };
}

/**
 * @typedef {object} RunScope
 * @property {string} runId
 * @property {string} sessionId
 * @property {string} sessionKey
 * @property {string} agentId
 */

/**
 * @typedef {object} CallReport
 * @property {boolean} blocked
 * @property {string | undefined} blockReason
 * @property {boolean} ran whether the tool itself ran
 * @property {{ content: { type: string, text?: string }[], details?: unknown }} seenByModel
 */

let callNumber = 0;

/**
 * One tool call through the plugin, in the order OpenClaw's embedded runner makes them.
 * @param {LoadedPlugin} plugin
 * @param {RunScope} scope
 * @param {string} toolName
 * @param {Record<string, unknown>} params
 * @param {() => { content: { type: 'text', text: string }[], details: Record<string, unknown> }} tool
 * @returns {Promise<CallReport>}
 */
export async function callTool(plugin, scope, toolName, params, tool) {
  const toolCallId = `call_${++callNumber}`;
  /** @type {ToolContext} */
  const ctx = { toolName, toolCallId, runId: scope.runId, sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: scope.agentId };
  /** @type {ToolCallEvent} */
  const before = { toolName, params, runId: scope.runId, toolCallId };
  const decision = await plugin.beforeToolCall(before, ctx);
  const blocked = Boolean(decision && decision.block);
  const blockReason = decision ? decision.blockReason : undefined;
  let result = blocked ? openclawBlockedResult(blockReason ?? 'Tool call blocked by plugin hook') : tool();
  if (plugin.middleware) {
    /** @type {MiddlewareEvent} */
    const event = { toolCallId, toolName, args: params, result };
    /** @type {MiddlewareContext} */
    const mctx = { runtime: 'openclaw', runId: scope.runId, sessionId: scope.sessionId, sessionKey: scope.sessionKey, agentId: scope.agentId };
    const rewritten = await plugin.middleware(event, mctx);
    if (rewritten) result = /** @type {typeof result} */ (rewritten.result);
  }
  /** @type {ToolResultEvent} */
  const after = { toolName, params, runId: scope.runId, toolCallId, result, durationMs: 1 };
  await plugin.afterToolCall(after, ctx);
  return { blocked, blockReason, ran: !blocked, seenByModel: result };
}
