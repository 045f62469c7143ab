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
 * @param {string} home @param {string} cwd @param {string} command @param {string[]} args
 */
function sh(home, cwd, command, args) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENCLAW_') && !k.startsWith('npm_')));
  const result = spawnSync(command, args, {
    cwd, encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS,
    env: { ...env, HOME: home, PATH: `${path.dirname(process.execPath)}${path.delimiter}${env.PATH ?? ''}` },
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
