/**
 * Names for the parts of OpenClaw's published plugin types this plugin handles. OpenClaw exports
 * `OpenClawPluginApi` but not its per-hook event types, so they are read off `api.on` itself:
 * whatever OpenClaw's handler signature for a hook is, these are its parameters and result.
 */
import type { OpenClawPluginApi } from 'openclaw/plugin-sdk/plugin-entry';

type HookName = Parameters<OpenClawPluginApi['on']>[0];
declare const api: OpenClawPluginApi;
type Handler<K extends HookName> = Parameters<typeof api.on<K>>[1];

export type ToolCallEvent = Parameters<Handler<'before_tool_call'>>[0];
export type ToolContext = Parameters<Handler<'before_tool_call'>>[1];
/** What a before_tool_call handler may answer (blocking is `{ block: true, blockReason }`). */
export type BlockResult = Exclude<Awaited<ReturnType<Handler<'before_tool_call'>>>, void | undefined>;
export type ToolResultEvent = Parameters<Handler<'after_tool_call'>>[0];
export type CompactionEvent = Parameters<Handler<'after_compaction'>>[0];
export type AgentContext = Parameters<Handler<'after_compaction'>>[1];
export type SessionEndEvent = Parameters<Handler<'session_end'>>[0];
export type SessionContext = Parameters<Handler<'session_end'>>[1];
export type SubagentSpawnedEvent = Parameters<Handler<'subagent_spawned'>>[0];
export type SubagentContext = Parameters<Handler<'subagent_spawned'>>[1];
export type LlmOutputEvent = Parameters<Handler<'llm_output'>>[0];

type Middleware = Parameters<OpenClawPluginApi['registerAgentToolResultMiddleware']>[0];
export type MiddlewareEvent = Parameters<Middleware>[0];
export type MiddlewareContext = Parameters<Middleware>[1];
export type MiddlewareResult = Exclude<Awaited<ReturnType<Middleware>>, void | undefined>;
