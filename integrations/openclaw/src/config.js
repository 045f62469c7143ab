// @ts-check
/**
 * The plugin's own settings (`plugins.entries.loopwarden.config` in openclaw.json), parsed once
 * into a frozen object. Thresholds are not here: they belong to the daemon's config file, whose
 * `tools.loopDetection` block is the one the detectors read (see README.md).
 */
import fs from 'node:fs';

export const PLUGIN_ID = 'loopwarden';
export const CONFIG_PATH = `plugins.entries.${PLUGIN_ID}.config`;

/** @typedef {'tool-result' | 'log' | 'off'} WarningDelivery */

/**
 * @typedef {object} PluginSettings
 * @property {string} target the daemon's gRPC address
 * @property {string} agentId sent as the event's agent id; '' means OpenClaw's ctx.agentId
 * @property {string} token bearer token ('' for none)
 * @property {boolean} failOpen daemon unreachable or too slow: run the tool unguarded (true) or block it
 * @property {number} timeoutMs budget of one daemon answer inside a hook
 * @property {WarningDelivery} warnings where an announced WARN goes
 * @property {boolean} abortRun on ABORT, also end the OpenClaw run (not only block the call)
 * @property {boolean} ask send accepts_ask: an ASK verdict becomes OpenClaw's requireApproval
 * @property {number} approvalTimeoutMs how long OpenClaw holds an asked call for a person's answer
 */

/** @type {Readonly<PluginSettings>} */
export const DEFAULT_SETTINGS = Object.freeze({
  target: '127.0.0.1:50051',
  agentId: '',
  token: '',
  failOpen: true,
  // NOTE: well inside OpenClaw's 15 s before_tool_call budget, whose expiry fails closed: a slow
  // daemon must be decided by this plugin's own policy (failOpen), not by the host's timeout.
  timeoutMs: 2000,
  warnings: 'tool-result',
  abortRun: true,
  ask: true,
  // NOTE: OpenClaw's own default for a plugin approval (DEFAULT_PLUGIN_APPROVAL_TIMEOUT_MS), and
  // inside the daemon's default loopwarden.askTimeoutSeconds (300 s), so OpenClaw gives up first.
  approvalTimeoutMs: 120_000,
});

/**
 * The largest `timeoutMs` accepted. OpenClaw 2026.9 gives a before_tool_call handler 15 s and
 * treats that hook as fail-closed: past 15 s it blocks the call ("Tool call blocked because
 * before_tool_call hook failed") whatever failOpen says. 10 s leaves the plugin's own deadline
 * room for the event loop and the handlers around it, so failOpen stays the plugin's decision.
 */
export const MAX_TIMEOUT_MS = 10_000;

/**
 * The bounds of `approvalTimeoutMs`. OpenClaw 2026.9 clamps a requireApproval's timeoutMs to at
 * most 600 s (MAX_PLUGIN_APPROVAL_TIMEOUT_MS) and denies the call when it runs out; 1 s is the
 * least that leaves a person any time at all.
 */
export const MIN_APPROVAL_TIMEOUT_MS = 1_000;
export const MAX_APPROVAL_TIMEOUT_MS = 600_000;

const WARNING_DELIVERIES = ['tool-result', 'log', 'off'];
const KEYS = ['target', 'agentId', 'token', 'tokenFile', 'failOpen', 'timeoutMs', 'warnings', 'abortRun', 'ask', 'approvalTimeoutMs'];

/** A plugin config value that cannot be used; the message names the dotted path. */
export class PluginConfigError extends Error {
  /** @param {string} key @param {string} problem */
  constructor(key, problem) {
    super(`${CONFIG_PATH}.${key}: ${problem}`);
    this.name = 'PluginConfigError';
  }
}

/** @param {Record<string, unknown>} raw @param {string} key */
function optionalString(raw, key) {
  const value = raw[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '') throw new PluginConfigError(key, 'must be a non-empty string');
  return value.trim();
}

/** @param {Record<string, unknown>} raw @param {string} key */
function optionalBoolean(raw, key) {
  const value = raw[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new PluginConfigError(key, 'must be true or false');
  return value;
}

/**
 * Parse `api.pluginConfig`. Unknown keys are errors: a misspelt `failOpen` silently keeping the
 * default is the kind of mistake that only shows during an outage.
 * @param {unknown} raw
 * @param {Record<string, string | undefined>} [env] LOOPWARDEN_TARGET is the address's fallback
 * @returns {Readonly<PluginSettings>}
 */
export function parseSettings(raw, env = process.env) {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new PluginConfigError('', 'must be an object');
  }
  const config = /** @type {Record<string, unknown>} */ (raw);
  for (const key of Object.keys(config)) {
    if (!KEYS.includes(key)) throw new PluginConfigError(key, `unknown key (known: ${KEYS.join(', ')})`);
  }
  const token = optionalString(config, 'token');
  const tokenFile = optionalString(config, 'tokenFile');
  if (token !== undefined && tokenFile !== undefined) {
    throw new PluginConfigError('tokenFile', 'set token or tokenFile, not both');
  }
  let fileToken;
  if (tokenFile !== undefined) {
    try {
      fileToken = fs.readFileSync(tokenFile, 'utf8').trim();
    } catch (err) {
      throw new PluginConfigError('tokenFile', `cannot be read: ${/** @type {Error} */ (err).message}`);
    }
    if (fileToken === '') throw new PluginConfigError('tokenFile', `${tokenFile} is empty`);
  }
  const timeoutMs = config.timeoutMs;
  if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || /** @type {number} */ (timeoutMs) <= 0)) {
    throw new PluginConfigError('timeoutMs', 'must be a positive integer (milliseconds)');
  }
  if (/** @type {number | undefined} */ (timeoutMs) !== undefined && /** @type {number} */ (timeoutMs) > MAX_TIMEOUT_MS) {
    throw new PluginConfigError('timeoutMs', `must be at most ${MAX_TIMEOUT_MS}: OpenClaw blocks a call whose before_tool_call `
      + 'handler outlives its 15 s budget, whatever failOpen says');
  }
  const warnings = config.warnings;
  if (warnings !== undefined && !WARNING_DELIVERIES.includes(/** @type {string} */ (warnings))) {
    throw new PluginConfigError('warnings', `must be one of ${WARNING_DELIVERIES.join(', ')}`);
  }
  const approvalTimeoutMs = config.approvalTimeoutMs;
  if (approvalTimeoutMs !== undefined && (!Number.isInteger(approvalTimeoutMs)
      || /** @type {number} */ (approvalTimeoutMs) < MIN_APPROVAL_TIMEOUT_MS
      || /** @type {number} */ (approvalTimeoutMs) > MAX_APPROVAL_TIMEOUT_MS)) {
    throw new PluginConfigError('approvalTimeoutMs', `must be an integer from ${MIN_APPROVAL_TIMEOUT_MS} to ${MAX_APPROVAL_TIMEOUT_MS} `
      + '(milliseconds; OpenClaw holds an approval for at most 600 s)');
  }
  const envTarget = env.LOOPWARDEN_TARGET?.trim();
  return Object.freeze({
    target: optionalString(config, 'target') ?? (envTarget || DEFAULT_SETTINGS.target),
    agentId: optionalString(config, 'agentId') ?? DEFAULT_SETTINGS.agentId,
    token: token ?? fileToken ?? DEFAULT_SETTINGS.token,
    failOpen: optionalBoolean(config, 'failOpen') ?? DEFAULT_SETTINGS.failOpen,
    timeoutMs: /** @type {number | undefined} */ (timeoutMs) ?? DEFAULT_SETTINGS.timeoutMs,
    warnings: /** @type {WarningDelivery | undefined} */ (warnings) ?? DEFAULT_SETTINGS.warnings,
    abortRun: optionalBoolean(config, 'abortRun') ?? DEFAULT_SETTINGS.abortRun,
    ask: optionalBoolean(config, 'ask') ?? DEFAULT_SETTINGS.ask,
    approvalTimeoutMs: /** @type {number | undefined} */ (approvalTimeoutMs) ?? DEFAULT_SETTINGS.approvalTimeoutMs,
  });
}
