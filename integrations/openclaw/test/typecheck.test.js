// @ts-check
// tsc --strict over the plugin and its tests (JSDoc, checkJs) against OpenClaw's published plugin
// types and the Node client's own types.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PLUGIN_DIR = fileURLToPath(new URL('..', import.meta.url));

test('the plugin type-checks under tsc --strict against openclaw\'s plugin-sdk types', () => {
  const tsc = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'],
    { cwd: PLUGIN_DIR, encoding: 'utf8', timeout: 300_000 });
  assert.equal(0, tsc.status, `${tsc.stdout}${tsc.stderr}`);
});
