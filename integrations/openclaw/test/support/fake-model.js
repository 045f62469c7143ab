// @ts-check
// A scripted model behind an OpenAI-compatible /v1/chat/completions endpoint on loopback, for
// `openclaw agent --local` (a custom provider in openclaw.json, `api: "openai-completions"`). It
// asks for the same tool call with the same arguments on every turn until the model has read
// `calls` tool results (or a blocked one), then answers with text. Every request body is kept,
// so a test can read exactly what the model was shown.
import http from 'node:http';

/**
 * @typedef {object} FakeModel
 * @property {string} baseUrl e.g. http://127.0.0.1:PORT/v1
 * @property {any[]} requests every chat-completions body received, in order
 * @property {() => string[]} toolResults the text of each tool message of the last request, in order
 * @property {() => Promise<void>} close
 */

/** @param {any} content a chat message's content: a string or text parts */
function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('\n');
  return '';
}

/**
 * `perTurn`: count only the tool results since the user's last message, so a second message in the
 * same session (a new OpenClaw run) gets `calls` more tool calls. `usage`: the tokens each response
 * reports (default 10 prompt, 5 completion).
 * @param {{ tool: string, args: Record<string, unknown>, calls: number, stopWhen?: (text: string) => boolean, perTurn?: boolean, usage?: { prompt_tokens: number, completion_tokens: number } }} script
 * @returns {Promise<FakeModel>}
 */
export async function startFakeModel(script) {
  /** @type {any[]} */
  const requests = [];
  /** @param {any} body */
  const turnMessages = (body) => {
    /** @type {any[]} */
    const messages = body?.messages ?? [];
    if (!script.perTurn) return messages;
    // NOTE: OpenClaw appends its own user-role context block after the tool results; the turn
    // starts at the last user message that is not one.
    const lastUser = messages.findLastIndex((m) => m.role === 'user' && !textOf(m.content).includes('<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>'));
    return messages.slice(lastUser + 1);
  };
  /** @param {any} body */
  const toolMessages = (body) => turnMessages(body).filter((/** @type {any} */ m) => m.role === 'tool').map((/** @type {any} */ m) => textOf(m.content));

  /** @param {any} body */
  function reply(body) {
    const seen = toolMessages(body);
    const stop = seen.length >= script.calls || seen.some((/** @type {string} */ text) => script.stopWhen?.(text));
    if (stop) return { content: `done after ${seen.length} tool results` };
    // Unique across the session's turns: a repeated id in the history would be a different call.
    return { toolCall: { id: `call_${requests.length}`, name: script.tool, arguments: JSON.stringify(script.args) } };
  }

  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { raw += chunk; });
    req.on('end', () => {
      if (req.method === 'GET' && req.url?.endsWith('/models')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model' }] }));
        return;
      }
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      let body;
      try { body = JSON.parse(raw); } catch { res.writeHead(400).end(); return; }
      requests.push(body);
      const answer = reply(body);
      const id = `chatcmpl-${requests.length}`;
      const created = Math.floor(Date.now() / 1000);
      const tokens = script.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
      const usage = { ...tokens, total_tokens: tokens.prompt_tokens + tokens.completion_tokens };
      const toolCalls = answer.toolCall
        ? [{ index: 0, id: answer.toolCall.id, type: 'function', function: { name: answer.toolCall.name, arguments: answer.toolCall.arguments } }]
        : undefined;
      const finish = toolCalls ? 'tool_calls' : 'stop';
      if (body.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        /** @param {unknown} chunk */
        const send = (chunk) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        const base = { id, object: 'chat.completion.chunk', created, model: body.model };
        send({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: answer.content ?? '', ...(toolCalls ? { tool_calls: toolCalls } : {}) }, finish_reason: null }] });
        send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
        send({ ...base, choices: [], usage });
        res.end('data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        id, object: 'chat.completion', created, model: body.model, usage,
        choices: [{ index: 0, finish_reason: finish, message: { role: 'assistant', content: answer.content ?? null, ...(toolCalls ? { tool_calls: toolCalls.map(({ index: _i, ...call }) => call) } : {}) } }],
      }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    baseUrl: `http://127.0.0.1:${address.port}/v1`,
    requests,
    toolResults: () => toolMessages(requests.at(-1)),
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve(undefined)); }),
  };
}
