// @ts-check
// `openclaw agent --local` run as a user runs it: a fresh HOME whose openclaw.json points at a
// scripted model and loads this plugin, and the CLI itself as a child process.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PLUGIN_DIR } from './openclaw-host.js';

const OPENCLAW = path.join(PLUGIN_DIR, 'node_modules', 'openclaw', 'openclaw.mjs');
export const AGENT_TIMEOUT_MS = 240_000;

/**
 * A fresh HOME with openclaw.json: the fake model as the default model, this plugin loaded and
 * explicitly enabled, OpenClaw's own loop detection off (README.md). `entry`: more of the
 * plugin's `plugins.entries.loopwarden` (its `hooks` grants).
 * @param {string} modelUrl @param {string} target @param {Record<string, unknown>} [entry]
 */
export function openclawHome(modelUrl, target, entry = {}) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'openclaw-agent-'));
  const workspace = path.join(home, 'workspace');
  fs.mkdirSync(workspace, { recursive: true });
  fs.writeFileSync(path.join(workspace, 'notes.txt'), 'line 1\nline 2\n');
  const config = {
    tools: { loopDetection: { enabled: false } },
    models: {
      mode: 'replace',
      providers: {
        fake: {
          baseUrl: modelUrl,
          apiKey: 'fake-key',
          api: 'openai-completions',
          models: [{ id: 'fake-model', name: 'Fake model', reasoning: false, input: ['text'],
            cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }],
        },
      },
    },
    agents: { defaults: { model: { primary: 'fake/fake-model' }, workspace } },
    plugins: {
      load: { paths: [PLUGIN_DIR] },
      entries: { loopwarden: { enabled: true, config: { target }, ...entry } },
    },
  };
  fs.mkdirSync(path.join(home, '.openclaw'), { recursive: true });
  fs.writeFileSync(path.join(home, '.openclaw', 'openclaw.json'), JSON.stringify(config, null, 2));
  return home;
}

/**
 * @param {string} home @param {string[]} args
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string }>}
 */
export function openclaw(home, args) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENCLAW_') && !k.startsWith('LOOPWARDEN_')));
  const child = spawn(process.execPath, [OPENCLAW, ...args], { cwd: home, env: { ...env, HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => { stdout += chunk; });
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const timer = setTimeout(() => child.kill('SIGKILL'), AGENT_TIMEOUT_MS);
  return new Promise((resolve) => child.once('close', (code) => {
    clearTimeout(timer);
    resolve({ code, stdout, stderr });
  }));
}
