// @ts-check
// The install the README documents, run as written by OpenClaw's own CLI (the openclaw this
// directory's package-lock.json pins) against a fresh copy of the repository's files: the
// client's contract copied in, `npm ci --omit=dev`, `openclaw plugins install --link … --force
// --accept-capabilities`, `openclaw plugins enable loopwarden`, `openclaw plugins list --json`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { closedAddress, startDaemon } from './support/daemon.js';
import { PLUGIN_DIR } from './support/openclaw-host.js';

const REPO_ROOT = path.resolve(PLUGIN_DIR, '..', '..');
const OPENCLAW = path.join(PLUGIN_DIR, 'node_modules', 'openclaw', 'openclaw.mjs');
const COMMAND_TIMEOUT_MS = 180_000;

/**
 * What a fresh clone holds of the parts the install reads: the tracked (and new, not ignored)
 * files of proto/, client/node and integrations/openclaw, as they are in the work tree.
 * @param {string} into
 */
function copyCheckout(into) {
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', 'proto', 'client/node', 'integrations/openclaw'],
    { cwd: REPO_ROOT, encoding: 'utf8' });
  assert.equal(0, listed.status, listed.stderr);
  for (const file of listed.stdout.split('\0').filter(Boolean)) {
    const from = path.join(REPO_ROOT, file);
    if (!fs.existsSync(from)) continue;   // deleted in the work tree, not yet committed
    fs.mkdirSync(path.dirname(path.join(into, file)), { recursive: true });
    fs.copyFileSync(from, path.join(into, file));
  }
}

/**
 * A command as a user types it, with this Node first on PATH and a HOME of its own.
 * @param {string} home @param {string} cwd @param {string} command @param {string[]} args @param {Record<string, string>} [extraEnv]
 */
function sh(home, cwd, command, args, extraEnv = {}) {
  // Nor the variables that pick the daemon's address: each test names its own.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENCLAW_') && !k.startsWith('npm_')
    && !['LOOPWARDEN_LISTEN', 'GRPC_PORT', 'LOOPWARDEN_TARGET'].includes(k)));
  const result = spawnSync(command, args, {
    cwd, encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS,
    env: { ...env, ...extraEnv, HOME: home, PATH: `${path.dirname(process.execPath)}${path.delimiter}${env.PATH ?? ''}` },
  });
  return { status: result.status, output: `$ ${[command, ...args].join(' ')}\n${result.stdout ?? ''}${result.stderr ?? ''}${result.error ?? ''}` };
}

/** @param {string} file */
const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/**
 * Every symlink under a directory, with where it points.
 * @param {string} dir @returns {{ link: string, target: string }[]}
 */
function symlinksUnder(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isSymbolicLink())
    .map((entry) => {
      const link = path.join(entry.parentPath, entry.name);
      return { link, target: fs.realpathSync(link) };
    });
}

describe('the documented install, by OpenClaw\'s own CLI', () => {
  /** @type {string} */
  let root;
  /** @type {string} */
  let checkout;
  /** @type {string} */
  let home;
  /** @type {string} */
  let plugin;
  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'openclaw-install-'));
    checkout = path.join(root, 'loopwarden');
    home = path.join(root, 'home');
    fs.mkdirSync(home);
    copyCheckout(checkout);
    plugin = path.join(checkout, 'integrations', 'openclaw');
  });
  after(() => {
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  test('plugins install --link --force succeeds on a fresh checkout, and the plugin is listed installed and enabled', () => {
    const lockBefore = sha256(path.join(plugin, 'package-lock.json'));
    const steps = [
      sh(home, checkout, process.execPath, ['client/node/scripts/copy-proto.js']),
      sh(home, plugin, 'npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline']),
      sh(home, checkout, process.execPath, [OPENCLAW, 'plugins', 'install', '--link', './integrations/openclaw', '--force', '--accept-capabilities']),
      sh(home, checkout, process.execPath, [OPENCLAW, 'plugins', 'enable', 'loopwarden']),
    ];
    const transcript = steps.map((step) => `${step.output}\n(exit ${step.status})`).join('\n\n');
    assert.deepEqual([0, 0, 0, 0], steps.map((step) => step.status), transcript);
    assert.equal(lockBefore, sha256(path.join(plugin, 'package-lock.json')), `the install rewrote package-lock.json\n${transcript}`);
    const leaving = symlinksUnder(path.join(plugin, 'node_modules')).filter(({ target }) => !target.startsWith(plugin + path.sep));
    assert.deepEqual([], leaving, 'no symlink under node_modules leaves the plugin (OpenClaw\'s install scan refuses one)');

    const list = sh(home, checkout, process.execPath, [OPENCLAW, 'plugins', 'list', '--json']);
    assert.equal(0, list.status, list.output);
    const listed = JSON.parse(list.output.slice(list.output.indexOf('{'))).plugins.find((/** @type {any} */ p) => p.id === 'loopwarden');
    assert.deepEqual({ rootDir: fs.realpathSync(plugin), enabled: true, status: 'loaded', requiredInstalled: true },
      { rootDir: listed?.rootDir && fs.realpathSync(listed.rootDir), enabled: listed?.enabled, status: listed?.status,
        requiredInstalled: listed?.dependencyStatus?.requiredInstalled }, list.output.slice(0, 4000));
  });

  test('without --accept-capabilities and no terminal to ask on, the install stops and names the flag', () => {
    const otherHome = fs.mkdtempSync(path.join(root, 'home-'));
    const step = sh(otherHome, checkout, process.execPath, [OPENCLAW, 'plugins', 'install', '--link', './integrations/openclaw', '--force']);
    assert.match(step.output, /requires capability consent.*--accept-capabilities/s, step.output);
    const config = path.join(otherHome, '.openclaw', 'openclaw.json');
    const paths = fs.existsSync(config) ? JSON.parse(fs.readFileSync(config, 'utf8')).plugins?.load?.paths ?? [] : [];
    assert.deepEqual([], paths, 'nothing was linked');
  });
});

describe('scripts/install.sh: the plugin\'s target is the daemon the user runs', () => {
  /** @type {string} */
  let root;
  /** @type {string} */
  let checkout;
  /** @type {import('./support/daemon.js').Daemon} */
  let daemon;
  before(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'openclaw-install-target-'));
    checkout = path.join(root, 'loopwarden');
    copyCheckout(checkout);
    daemon = await startDaemon({});
  });
  after(async () => {
    await daemon?.stop();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  /**
   * install.sh in a HOME of its own, then what OpenClaw reads back of the plugin's target.
   * @param {string[]} args @param {Record<string, string>} env
   */
  function install(args, env) {
    const home = fs.mkdtempSync(path.join(root, 'home-'));
    const step = sh(home, checkout, 'bash', ['integrations/openclaw/scripts/install.sh', '--openclaw', OPENCLAW, ...args], env);
    const get = sh(home, checkout, process.execPath, [OPENCLAW, 'config', 'get', 'plugins.entries.loopwarden.config.target', '--json']);
    const json = get.output.slice(get.output.indexOf('\n') + 1).trim();
    const target = get.status === 0 ? JSON.parse(json.slice(json.search(/["{]/))) : undefined;
    return { home, status: step.status, output: step.output, target: typeof target === 'string' ? target : target?.value };
  }

  test('GRPC_PORT (make serve\'s port): install.sh checks the daemon there, writes its address with openclaw config set, and says why', () => {
    const port = daemon.grpcTarget.slice(daemon.grpcTarget.lastIndexOf(':') + 1);
    const { home, status, output, target } = install([], { GRPC_PORT: port });
    assert.equal(0, status, output);
    assert.match(output, new RegExp(`target will be 127\\.0\\.0\\.1:${port} \\(from GRPC_PORT\\)`), output);
    assert.match(output, /a loopwarden daemon answers at .*SERVING/, output);
    assert.match(output, /\$ openclaw config set plugins\.entries\.loopwarden\.config\.target/, output);
    assert.equal(`127.0.0.1:${port}`, target, output);
    const list = sh(home, checkout, process.execPath, [OPENCLAW, 'plugins', 'list', '--json']);
    const listed = JSON.parse(list.output.slice(list.output.indexOf('{'))).plugins.find((/** @type {any} */ p) => p.id === 'loopwarden');
    assert.deepEqual({ enabled: true, status: 'loaded' }, { enabled: listed?.enabled, status: listed?.status }, list.output.slice(0, 4000));
  });

  test('--target wins over LOOPWARDEN_LISTEN, which wins over GRPC_PORT; a wildcard listen host is dialled on 127.0.0.1', () => {
    const port = daemon.grpcTarget.slice(daemon.grpcTarget.lastIndexOf(':') + 1);
    const flag = install(['--target', daemon.grpcTarget], { LOOPWARDEN_LISTEN: '127.0.0.1:1', GRPC_PORT: '2' });
    assert.equal(0, flag.status, flag.output);
    assert.match(flag.output, /\(from --target\)/);
    assert.equal(daemon.grpcTarget, flag.target);
    const listen = install([], { LOOPWARDEN_LISTEN: `0.0.0.0:${port}`, GRPC_PORT: '2' });
    assert.equal(0, listen.status, listen.output);
    assert.match(listen.output, /\(from LOOPWARDEN_LISTEN\)/);
    assert.equal(`127.0.0.1:${port}`, listen.target);
  });

  test('no daemon at the address: install.sh stops before touching OpenClaw and names the address; --no-check writes it anyway', async () => {
    const nobody = await closedAddress();
    const refused = install(['--target', nobody], {});
    assert.equal(1, refused.status, refused.output);
    assert.match(refused.output, new RegExp(`no loopwarden daemon at ${nobody.replace(/\./g, '\\.')}: nothing answers there`), refused.output);
    assert.match(refused.output, /--no-check/);
    assert.doesNotMatch(refused.output, /\$ openclaw plugins install/);
    assert.equal(undefined, refused.target, refused.output);
    const forced = install(['--target', nobody, '--no-check'], {});
    assert.equal(0, forced.status, forced.output);
    assert.equal(nobody, forced.target, forced.output);
  });
});
