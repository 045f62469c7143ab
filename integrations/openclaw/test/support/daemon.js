// @ts-check
// Starts the real daemon on loopback (ports chosen by the OS), the way client/node/test/support
// does, plus its metrics address and a scrape helper.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const STARTUP_TIMEOUT_MS = 30_000;

/**
 * Detection on with the documented defaults (warn at 11, block the 21st identical call); agent
 * `coder` is named so the metrics carry its label, agent `strict` has thresholds of its own.
 */
export const DETECTION_ON = Object.freeze({
  tools: { loopDetection: { enabled: true } },
  // NOTE: agents.list[], not OpenClaw's newer agents.entries map: the daemon reads only the list.
  agents: {
    list: [
      { id: 'coder', tools: { loopDetection: { enabled: true } } },
      { id: 'strict', tools: { loopDetection: { warningThreshold: 2, criticalThreshold: 4 } } },
    ],
  },
});

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
 * @typedef {{ grpcTarget: string, metricsAddress: string, stop: () => Promise<void>, logs: string[] }} Daemon
 */

/**
 * @param {object} config the daemon's whole config file
 * @returns {Promise<Daemon>}
 */
export async function startDaemon(config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loopwarden-openclaw-'));
  const configPath = path.join(dir, 'loopwarden.json5');
  fs.writeFileSync(configPath, JSON.stringify(config));
  const [cmd, ...prefix] = loopwardenCommand();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LOOPWARDEN_')));
  const child = spawn(cmd, [...prefix, 'serve', '--listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0',
    '--config', configPath], { stdio: ['ignore', 'ignore', 'pipe'], env });
  /** @type {string[]} */
  const logs = [];
  const exited = new Promise((resolve) => child.once('exit', resolve));
  /** @type {Promise<{ grpc: string, metrics: string }>} */
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
          resolve({ grpc: record.grpc_address, metrics: record.metrics_address });
        }
      });
  });
  let addresses;
  try {
    addresses = await listening;
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
  return { grpcTarget: addresses.grpc, metricsAddress: addresses.metrics, stop, logs };
}

/**
 * One sample of the daemon's /metrics, 0 when absent.
 * @param {string} metricsAddress host:port @param {string} name @param {Record<string, string>} labels
 */
export async function metricValue(metricsAddress, name, labels) {
  const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.indexOf('}'));
    if (wanted.every((pair) => labelText.split(',').includes(pair))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

/** A loopback address where nothing listens: bound, then closed. */
export async function closedAddress() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {net.AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(() => resolve(undefined)));
  return `127.0.0.1:${port}`;
}

/**
 * A loopback TCP server that accepts connections and never answers: a hung daemon.
 * @returns {Promise<{ address: string, close: () => Promise<void> }>}
 */
export async function silentServer() {
  /** @type {Set<net.Socket>} */
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {net.AddressInfo} */ (server.address());
  return {
    address: `127.0.0.1:${port}`,
    close: () => new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve(undefined));
    }),
  };
}
