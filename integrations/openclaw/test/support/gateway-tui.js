// @ts-check
// A child process that connects to the OpenClaw gateway of $HOME's openclaw.json the way
// `openclaw tui` does (OpenClaw's own GatewayChatClient: client `openclaw-tui`, scope
// operator.approvals, cap plugin-approvals), sends one chat message to a session, and prints the
// approval and chat events it receives as JSON lines. It never answers an approval itself: it is
// the approval-capable surface a gateway run needs, and the test answers from `openclaw approvals`.
//
//   node gateway-tui.js <sessionKey> <message>
//
// NOTE: GatewayChatClient is an OpenClaw internal (dist/gateway-chat-*.mjs), pinned by
// package-lock.json; it runs in its own process because it reads $HOME's config once.
import fs from 'node:fs';
import path from 'node:path';
import { PLUGIN_DIR } from './openclaw-host.js';

const DIST = path.join(PLUGIN_DIR, 'node_modules', 'openclaw', 'dist');
const chunk = fs.readdirSync(DIST).find((file) => file.startsWith('gateway-chat-') && file.endsWith('.mjs')
  && fs.readFileSync(path.join(DIST, file), 'utf8').includes('//#region src/tui/gateway-chat.ts'));
if (!chunk) throw new Error('no OpenClaw chunk holds src/tui/gateway-chat.ts');
/** @type {any} */
const { GatewayChatClient } = await import(path.join(DIST, chunk));

const [sessionKey, message] = process.argv.slice(2);
/** @param {Record<string, unknown>} line */
const emit = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

const client = await GatewayChatClient.connect({});
client.onEvent = (/** @type {{ event: string, payload: any }} */ { event, payload }) => {
  if (event.startsWith('plugin.approval.') || (event === 'chat' && payload?.state === 'final')) emit({ event, payload });
};
client.onConnectError = (/** @type {Error} */ err) => emit({ event: 'connect-error', payload: { message: err.message } });
client.start();
await client.waitForReady();
emit({ event: 'ready', payload: {} });
emit({ event: 'sent', payload: await client.sendChat({ sessionKey, message }) });
