// @ts-check
// The plugin's settings and its mapping of OpenClaw payloads, without a daemon.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { approvalAnswer, approvalRequest } from '../src/approvals.js';
import { DEFAULT_SETTINGS, MAX_APPROVAL_TIMEOUT_MS, MAX_TIMEOUT_MS, PluginConfigError, parseSettings } from '../src/config.js';
import { DEFAULT_TARGET, InstallError, parseArgs, resolveTarget } from '../scripts/install.mjs';
import { callKey, outcomeOf, resultForDaemon, runIdOf, turnOf, withNote } from '../src/mapping.js';

const manifest = JSON.parse(fs.readFileSync(new URL('../openclaw.plugin.json', import.meta.url), 'utf8'));

describe('settings (plugins.entries.loopwarden.config)', () => {
  test('no config: the defaults, fail open', () => {
    assert.deepEqual(DEFAULT_SETTINGS, parseSettings(undefined, {}));
    assert.equal(true, parseSettings({}, {}).failOpen);
  });

  test('LOOPWARDEN_TARGET is the address when the config names none', () => {
    assert.equal('10.0.0.1:7000', parseSettings({}, { LOOPWARDEN_TARGET: '10.0.0.1:7000' }).target);
    assert.equal('127.0.0.1:1', parseSettings({ target: '127.0.0.1:1' }, { LOOPWARDEN_TARGET: '10.0.0.1:7000' }).target);
  });

  test('an unknown key is an error naming its dotted path', () => {
    assert.throws(() => parseSettings({ failopen: false }, {}),
      (err) => err instanceof PluginConfigError && err.message.startsWith('plugins.entries.loopwarden.config.failopen: unknown key'));
  });

  test('wrong types are errors naming the key', () => {
    assert.throws(() => parseSettings({ failOpen: 'no' }, {}), /config\.failOpen: must be true or false/);
    assert.throws(() => parseSettings({ timeoutMs: 0 }, {}), /config\.timeoutMs: must be a positive integer/);
    assert.throws(() => parseSettings({ warnings: 'model' }, {}), /config\.warnings: must be one of tool-result, log, off/);
    assert.throws(() => parseSettings({ target: ' ' }, {}), /config\.target: must be a non-empty string/);
  });

  test('timeoutMs stays inside OpenClaw\'s 15 s before_tool_call budget, in the parser and the manifest', () => {
    assert.equal(10_000, MAX_TIMEOUT_MS);
    assert.equal(MAX_TIMEOUT_MS, parseSettings({ timeoutMs: MAX_TIMEOUT_MS }, {}).timeoutMs);
    assert.throws(() => parseSettings({ timeoutMs: 15_000 }, {}), /config\.timeoutMs: must be at most 10000/);
    assert.equal(MAX_TIMEOUT_MS, manifest.configSchema.properties.timeoutMs.maximum);
  });

  test('tokenFile is read and trimmed; token and tokenFile together are an error', () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lw-token-')), 'token');
    fs.writeFileSync(file, 's3cret\n');
    assert.equal('s3cret', parseSettings({ tokenFile: file }, {}).token);
    assert.throws(() => parseSettings({ token: 'a', tokenFile: file }, {}), /config\.tokenFile: set token or tokenFile, not both/);
    assert.throws(() => parseSettings({ tokenFile: `${file}.missing` }, {}), /config\.tokenFile: cannot be read/);
  });

  test('the manifest\'s configSchema names exactly the keys the plugin reads, with the same defaults', () => {
    const schema = manifest.configSchema;
    assert.equal(false, schema.additionalProperties);
    assert.deepEqual(['abortRun', 'agentId', 'approvalTimeoutMs', 'ask', 'failOpen', 'target', 'timeoutMs', 'token', 'tokenFile', 'warnings'],
      Object.keys(schema.properties).sort());
    for (const key of ['failOpen', 'timeoutMs', 'warnings', 'abortRun', 'ask', 'approvalTimeoutMs']) {
      assert.equal(/** @type {any} */ (DEFAULT_SETTINGS)[key], schema.properties[key].default, key);
    }
  });

  test('approvalTimeoutMs stays within OpenClaw\'s approval bounds (1 s to 600 s), in the parser and the manifest', () => {
    assert.equal(120_000, parseSettings({}, {}).approvalTimeoutMs, 'OpenClaw\'s own default');
    assert.equal(600_000, MAX_APPROVAL_TIMEOUT_MS);
    assert.equal(MAX_APPROVAL_TIMEOUT_MS, manifest.configSchema.properties.approvalTimeoutMs.maximum);
    assert.throws(() => parseSettings({ approvalTimeoutMs: 600_001 }, {}), /config\.approvalTimeoutMs: must be an integer from 1000 to 600000/);
    assert.throws(() => parseSettings({ approvalTimeoutMs: 999 }, {}), /config\.approvalTimeoutMs/);
    assert.throws(() => parseSettings({ ask: 'yes' }, {}), /config\.ask: must be true or false/);
    assert.equal(false, parseSettings({ ask: false }, {}).ask);
  });

  test('the manifest declares the middleware runtimes the plugin registers', () => {
    assert.equal('loopwarden', manifest.id);
    assert.deepEqual(['openclaw', 'codex'], manifest.contracts.agentToolResultMiddleware);
  });
});

describe('mapping OpenClaw payloads', () => {
  test('the run is OpenClaw\'s session (its id, else its key, else the OpenClaw run); the OpenClaw run is its turn', () => {
    assert.equal('uuid', runIdOf({ runId: 'r1', sessionKey: 'agent:main:main', sessionId: ' uuid ' }));
    assert.equal('session:agent:main:main', runIdOf({ runId: 'r1', sessionKey: 'agent:main:main' }));
    assert.equal('run:r2', runIdOf({}, { runId: 'r2' }));
    assert.equal('', runIdOf({}));
    assert.equal('r1', turnOf({ runId: ' r1 ' }));
    assert.equal('r2', turnOf({}, { runId: 'r2' }));
    assert.equal('', turnOf({}));
  });

  test('an ASK becomes a requireApproval within OpenClaw\'s text limits; its resolutions become answers', () => {
    const verdict = /** @type {any} */ ({ message: `CRITICAL: this call is held for a person ${'x'.repeat(600)}`, decisionId: 'd1' });
    const request = approvalRequest(verdict, 'read', 60_000, () => {});
    assert.ok(Array.from(request.title).length <= 80 && Array.from(request.description).length <= 512);
    assert.equal('critical', request.severity);
    assert.equal(60_000, request.timeoutMs);
    assert.deepEqual(['allow-once', 'allow-always', 'deny'], request.allowedDecisions);
    assert.match(request.timeoutReason ?? '', /Nobody answered within 60 s/);
    assert.deepEqual({ approved: true, scope: 'once' }, approvalAnswer('allow-once'));
    assert.deepEqual({ approved: true, scope: 'always' }, approvalAnswer('allow-always'));
    for (const denial of /** @type {const} */ (['deny', 'timeout', 'cancelled'])) {
      assert.deepEqual({ approved: false, scope: 'once' }, approvalAnswer(denial), denial);
    }
  });

  test('a call is keyed by its tool call id, else by tool and params', () => {
    assert.equal(callKey('r', 'read', 'c1', { a: 1 }), callKey('r', 'exec', 'c1', { b: 2 }));
    assert.notEqual(callKey('r', 'read', undefined, { a: 1 }), callKey('r', 'read', undefined, { a: 2 }));
  });

  test('image bytes are not sent; the text and details the daemon hashes are', () => {
    const result = { content: [{ type: 'text', text: 'hi' }, { type: 'image', data: 'AAAA', mimeType: 'image/png' }], details: { ok: 1 } };
    assert.deepEqual({ content: [{ type: 'text', text: 'hi' }, { type: 'image', mimeType: 'image/png' }], details: { ok: 1 } },
      resultForDaemon(result));
  });

  test('the appended warning is removed before the outcome is reported', () => {
    const result = { content: [{ type: 'text', text: 'same' }], details: {} };
    const noted = withNote(result, 'Warning: stop');
    assert.equal(2, noted.content.length);
    assert.deepEqual({ result }, outcomeOf({ result: noted }, 'Warning: stop'));
  });

  test('an error is reported as the error text; no result, nothing', () => {
    assert.deepEqual({ error: 'Tool x not found' }, outcomeOf({ result: { content: [] }, error: 'Tool x not found' }));
    assert.deepEqual({}, outcomeOf({}));
    assert.deepEqual({ result: 'plain' }, outcomeOf({ result: 'plain' }));
  });
});

describe('scripts/install.mjs: which daemon address the install writes', () => {
  test('--target, then LOOPWARDEN_LISTEN, then GRPC_PORT on 127.0.0.1, then the daemon\'s default', () => {
    const env = { LOOPWARDEN_LISTEN: '10.0.0.2:7001', GRPC_PORT: '50061' };
    assert.deepEqual({ target: '10.0.0.1:7000', source: '--target' }, resolveTarget({ target: '10.0.0.1:7000' }, env));
    assert.deepEqual({ target: '10.0.0.2:7001', source: 'LOOPWARDEN_LISTEN' }, resolveTarget({}, env));
    assert.deepEqual({ target: '127.0.0.1:50061', source: 'GRPC_PORT' }, resolveTarget({}, { GRPC_PORT: '50061' }));
    assert.deepEqual({ target: DEFAULT_TARGET, source: 'the default' }, resolveTarget({}, { GRPC_PORT: '', LOOPWARDEN_LISTEN: ' ' }));
    assert.equal('127.0.0.1:50051', DEFAULT_TARGET);
  });

  test('a wildcard listen host is dialled on the loopback; IPv6 keeps its brackets', () => {
    assert.equal('127.0.0.1:7002', resolveTarget({}, { LOOPWARDEN_LISTEN: '0.0.0.0:7002' }).target);
    assert.equal('127.0.0.1:7003', resolveTarget({}, { LOOPWARDEN_LISTEN: '[::]:7003' }).target);
    assert.equal('127.0.0.1:7004', resolveTarget({}, { LOOPWARDEN_LISTEN: ':7004' }).target);
    assert.equal('[::1]:7005', resolveTarget({ target: '[::1]:7005' }, {}).target);
    assert.equal('daemon.internal:7006', resolveTarget({ target: 'daemon.internal:7006' }, {}).target);
  });

  test('an address that is not HOST:PORT is an error naming where it came from', () => {
    assert.throws(() => resolveTarget({}, { GRPC_PORT: 'fifty' }), (err) => err instanceof InstallError && /^GRPC_PORT is/.test(err.message));
    assert.throws(() => resolveTarget({ target: '127.0.0.1' }, {}), (err) => err instanceof InstallError && /^--target is/.test(err.message));
    assert.throws(() => resolveTarget({ target: '127.0.0.1:70000' }, {}), InstallError);
  });

  test('flags: --target (also --target=…), --no-check, --openclaw; anything else is refused', () => {
    assert.deepEqual({ check: true, openclaw: 'openclaw', target: '127.0.0.1:1' }, parseArgs(['--target', '127.0.0.1:1']));
    assert.deepEqual({ check: false, openclaw: '/x/openclaw', target: '127.0.0.1:2' }, parseArgs(['--target=127.0.0.1:2', '--no-check', '--openclaw', '/x/openclaw']));
    assert.throws(() => parseArgs(['--target']), InstallError);
    assert.throws(() => parseArgs(['--port', '1']), (err) => err instanceof InstallError && /unknown argument --port/.test(err.message));
  });
});
