// prepack: ship the contract inside the package, where src/stub.js looks for it first.
import fs from 'node:fs';

const from = new URL('../../../proto/loopwarden/v1/loopwarden.proto', import.meta.url);
const to = new URL('../proto/loopwarden/v1/', import.meta.url);
fs.mkdirSync(to, { recursive: true });
fs.copyFileSync(from, new URL('loopwarden.proto', to));
