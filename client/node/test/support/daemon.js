// @ts-check
// Starts the real daemon on loopback (ports chosen by the OS), one per config, like the Python
// harness tests/support/daemon.py.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const STARTUP_TIMEOUT_MS = 30_000;

/**
 * The command that runs `loopwarden`: LOOPWARDEN_SERVE_CMD (a JSON array, set by the pytest
 * wrapper to its own interpreter), else the repository's .venv, else PATH.
 * @returns {string[]}
 */
export function loopwardenCommand() {
  if (process.env.LOOPWARDEN_SERVE_CMD) return JSON.parse(process.env.LOOPWARDEN_SERVE_CMD);
  const venv = path.join(REPO_ROOT, '.venv', 'bin', 'loopwarden');
  return [fs.existsSync(venv) ? venv : 'loopwarden'];
}

/**
 * @typedef {{ grpcTarget: string, stop: () => Promise<void>, logs: string[] }} Daemon
 */

/**
 * @param {object} config the daemon's whole config file
 * @param {string[]} [extraArgs] more `serve` flags
 * @returns {Promise<Daemon>}
 */
export async function startDaemon(config, extraArgs = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loopwarden-node-'));
  const configPath = path.join(dir, 'loopwarden.json5');
  fs.writeFileSync(configPath, JSON.stringify(config));
  const [cmd, ...prefix] = loopwardenCommand();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LOOPWARDEN_')));
  const child = spawn(cmd, [...prefix, 'serve', '--listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0',
    '--config', configPath, ...extraArgs], { stdio: ['ignore', 'ignore', 'pipe'], env });
  /** @type {string[]} */
  const logs = [];
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const listening = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start in time: ${logs.join('\n')}`)),
      STARTUP_TIMEOUT_MS);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`daemon exited (${code}) before listening: ${logs.join('\n')}`)));
    readline.createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stderr) })
      .on('line', (line) => {
        logs.push(line);
        let record;
        try { record = JSON.parse(line); } catch { return; }
        if (record.msg === 'listening') {
          clearTimeout(timer);
          resolve(record.grpc_address);
        }
      });
  });
  let grpcTarget;
  try {
    grpcTarget = await listening;
  } catch (err) {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { grpcTarget, stop, logs };
}
