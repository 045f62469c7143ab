// @ts-check
/**
 * The service stub, built from the repository's .proto at run time with @grpc/proto-loader (see
 * README.md for why no generated code is committed here). The only module that loads the contract.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

export const SERVICE_NAME = 'loopwarden.v1.LoopDetectionService';

const PROTO_FILE = 'loopwarden/v1/loopwarden.proto';

/** The packed copy (`npm pack` puts proto/ beside src/), else the repository's contract. */
export const DEFAULT_PROTO_ROOT = [new URL('../proto', import.meta.url), new URL('../../../proto', import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((root) => fs.existsSync(path.join(root, PROTO_FILE))) ?? fileURLToPath(new URL('../../../proto', import.meta.url));

export const PROTO_PATH = path.join(DEFAULT_PROTO_ROOT, PROTO_FILE);

// NOTE: longs as Number: seq and events_evaluated are uint64 on the wire but a runner numbers its
// events from 1; 2^53 events per process is not a case worth a BigInt in every caller's face.
const LOADER_OPTIONS = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true };

const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': 8 * 1024 * 1024,
  'grpc.max_send_message_length': 8 * 1024 * 1024,
};

/** @type {Map<string, any>} */
const serviceCache = new Map();

/**
 * The generated-at-run-time service constructor for one proto root.
 * @param {string} protoRoot
 */
export function loadService(protoRoot = DEFAULT_PROTO_ROOT) {
  let service = serviceCache.get(protoRoot);
  if (!service) {
    const definition = protoLoader.loadSync(PROTO_FILE, { ...LOADER_OPTIONS, includeDirs: [protoRoot] });
    /** @type {any} */
    const pkg = grpc.loadPackageDefinition(definition);
    service = pkg.loopwarden.v1.LoopDetectionService;
    serviceCache.set(protoRoot, service);
  }
  return service;
}

/**
 * A stub of the service on its own channel to `target`.
 * @param {string} target @param {grpc.ChannelCredentials} credentials @param {string} [protoRoot]
 * @returns {any}
 */
export function createStub(target, credentials, protoRoot) {
  const Service = loadService(protoRoot);
  return new Service(target, credentials, CHANNEL_OPTIONS);
}
