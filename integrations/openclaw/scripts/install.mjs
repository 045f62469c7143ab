#!/usr/bin/env node
// @ts-check
/**
 * The OpenClaw half of the plugin's install (scripts/install.sh runs the npm half first): decide
 * which daemon address the plugin talks to, check that a loopwarden daemon answers there, then
 * let OpenClaw's own CLI link and enable the plugin and write that address as its `target`.
 *
 *   node scripts/install.mjs [--target HOST:PORT] [--no-check] [--openclaw COMMAND]
 *
 * The address, first found wins (the way `make serve` and the daemon pick where to listen):
 *   --target HOST:PORT, else LOOPWARDEN_LISTEN (the daemon's own variable), else GRPC_PORT
 *   (`make serve GRPC_PORT=…`, on 127.0.0.1), else 127.0.0.1:50051, the daemon's default.
 * A wildcard listen host (0.0.0.0, ::) becomes 127.0.0.1: the plugin dials, it does not listen.
 *
 * The config is written with `openclaw config set`, OpenClaw's supported way to change one key:
 * it validates the value against this plugin's manifest schema and keeps the rest of the file.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const DEFAULT_TARGET = '127.0.0.1:50051';
export const TARGET_KEY = 'plugins.entries.loopwarden.config.target';
/** The daemon's service: a health answer for it tells a loopwarden daemon from any gRPC server. */
export const SERVICE = 'loopwarden.v1.LoopDetectionService';
const CHECK_TIMEOUT_MS = 5000;

const PLUGIN_DIR = fileURLToPath(new URL('..', import.meta.url));

/** Thrown for anything the user has to fix; the message says what. */
export class InstallError extends Error {}

/**
 * Where the plugin should dial, and why that address.
 * @param {{ target?: string }} flags @param {Record<string, string | undefined>} env
 * @returns {{ target: string, source: string }}
 */
export function resolveTarget(flags, env) {
  /** @type {[string | undefined, string][]} */
  const candidates = [
    [flags.target, '--target'],
    [env.LOOPWARDEN_LISTEN, 'LOOPWARDEN_LISTEN'],
    [env.GRPC_PORT && `127.0.0.1:${env.GRPC_PORT.trim()}`, 'GRPC_PORT'],
  ];
  for (const [value, source] of candidates) {
    const trimmed = value?.trim();
    if (trimmed) return { target: dialable(trimmed, source), source };
  }
  return { target: DEFAULT_TARGET, source: 'the default' };
}

/**
 * HOST:PORT as a client dials it. A listen address may name every interface; the plugin runs on
 * the daemon's machine when it reads that variable, so it dials the loopback there.
 * @param {string} address @param {string} source
 */
function dialable(address, source) {
  const match = /^(?:\[([^\]]*)\]|([^:]*)):(\d+)$/.exec(address);
  if (!match || Number(match[3]) < 1 || Number(match[3]) > 65535) {
    throw new InstallError(`${source} is ${JSON.stringify(address)}: expected HOST:PORT (a port from 1 to 65535)`);
  }
  const host = match[1] ?? match[2];
  if (host === '' || host === '0.0.0.0' || host === '::') return `127.0.0.1:${match[3]}`;
  return match[1] !== undefined ? `[${host}]:${match[3]}` : address;
}

/**
 * The standard gRPC health check (grpc.health.v1.Health/Check) of the daemon's service, which a
 * loopwarden daemon answers without a token. Resolves to a sentence saying what answered, or
 * rejects with one saying why not.
 * @param {string} target
 * @returns {Promise<string>}
 */
export async function checkDaemon(target) {
  const grpc = await import('@grpc/grpc-js');
  // HealthCheckRequest { string service = 1 } and HealthCheckResponse { ServingStatus status = 1 }
  // are one field each: encoded by hand, so the check needs no health .proto file.
  const request = Buffer.concat([Buffer.from([0x0a, SERVICE.length]), Buffer.from(SERVICE)]);
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  try {
    const status = await new Promise((resolve, reject) => {
      client.makeUnaryRequest('/grpc.health.v1.Health/Check', (/** @type {Buffer} */ b) => b, (/** @type {Buffer} */ b) => b,
        request, { deadline: Date.now() + CHECK_TIMEOUT_MS }, (err, /** @type {Buffer | undefined} */ reply) => {
          if (err) reject(err);
          else resolve(reply && reply.length >= 2 && reply[0] === 0x08 ? reply[1] : 0);
        });
    });
    if (status === 1) return `a loopwarden daemon answers at ${target} (${SERVICE}: SERVING)`;
    throw new InstallError(`the gRPC server at ${target} reports ${SERVICE} as not serving (status ${status}); `
      + 'is the daemon still starting or shutting down?');
  } catch (err) {
    if (err instanceof InstallError) throw err;
    const code = /** @type {{ code?: number }} */ (err).code;
    const reason = code === grpc.status.NOT_FOUND ? `a gRPC server answers there, but not a loopwarden daemon (it has no ${SERVICE})`
      : code === grpc.status.UNIMPLEMENTED ? 'a gRPC server answers there, but without the health service a loopwarden daemon has'
        : code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED ? 'nothing answers there'
          : /** @type {Error} */ (err).message;
    throw new InstallError(`no loopwarden daemon at ${target}: ${reason}`);
  } finally {
    client.close();
  }
}

/** @param {string[]} argv */
export function parseArgs(argv) {
  /** @type {{ target?: string, check: boolean, openclaw: string }} */
  const flags = { check: true, openclaw: 'openclaw' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [name, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new InstallError(`${name} needs a value`);
      return v;
    };
    if (name === '--target') flags.target = value();
    else if (name === '--openclaw') flags.openclaw = value();
    else if (name === '--no-check') flags.check = false;
    else if (name === '-h' || name === '--help') throw new InstallError(USAGE);
    else throw new InstallError(`unknown argument ${arg}\n${USAGE}`);
  }
  return flags;
}

const USAGE = 'usage: install.sh [--target HOST:PORT] [--no-check] [--openclaw COMMAND]\n'
  + '  --target     the daemon\'s gRPC address (else LOOPWARDEN_LISTEN, else 127.0.0.1:$GRPC_PORT, else 127.0.0.1:50051)\n'
  + '  --no-check   write the address without checking that a loopwarden daemon answers there\n'
  + '  --openclaw   the openclaw command (default: openclaw on PATH)';

/**
 * One OpenClaw CLI command, its output passed through; a failure stops the install.
 * @param {string} openclaw @param {string[]} args
 */
function openclawRun(openclaw, args) {
  const [command, prefix] = /\.(m?js)$/.test(openclaw) ? [process.execPath, [openclaw]] : [openclaw, []];
  console.log(`$ openclaw ${args.join(' ')}`);
  const result = spawnSync(command, [...prefix, ...args], { cwd: path.resolve(PLUGIN_DIR, '..', '..'), stdio: 'inherit' });
  if (result.error) throw new InstallError(`cannot run ${openclaw}: ${result.error.message} (is openclaw on PATH? else pass --openclaw)`);
  if (result.status !== 0) throw new InstallError(`openclaw ${args.join(' ')} failed (exit ${result.status})`);
}

/** @param {string[]} argv @param {Record<string, string | undefined>} env */
export async function main(argv, env) {
  const flags = parseArgs(argv);
  const { target, source } = resolveTarget(flags, env);
  const why = source === 'the default' ? 'no --target, LOOPWARDEN_LISTEN or GRPC_PORT given, so the daemon\'s default'
    : `from ${source}`;
  console.log(`loopwarden: the plugin's target will be ${target} (${why})`);
  if (flags.check) {
    console.log(`loopwarden: ${await checkDaemon(target)}`);
  } else {
    console.log('loopwarden: --no-check: not checking that a daemon answers there');
  }
  openclawRun(flags.openclaw, ['plugins', 'install', '--link', PLUGIN_DIR.replace(/\/$/, ''), '--force', '--accept-capabilities']);
  openclawRun(flags.openclaw, ['plugins', 'enable', 'loopwarden']);
  openclawRun(flags.openclaw, ['config', 'set', TARGET_KEY, JSON.stringify(target), '--strict-json']);
  console.log(`loopwarden: wrote ${TARGET_KEY} = ${target} (${why})`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2), process.env).catch((err) => {
    console.error(err instanceof InstallError ? `loopwarden: ${err.message}` : err);
    if (err instanceof InstallError && /^no loopwarden daemon/.test(err.message)) {
      console.error('loopwarden: start the daemon first (make serve, or loopwarden serve --listen HOST:PORT), '
        + 'pass --target with the address it listens on, or --no-check to write the address anyway');
    }
    process.exit(err instanceof InstallError && err.message === USAGE ? 0 : 1);
  });
}
