// Stop → turn end through the example server's Stop route: `npm run build && node
// examples/agent-server/stop-latency.mjs [runs=20]`. Starts the server (dist, a fresh ledger under
// the OS temp dir), and per run: a fresh session, its event stream, a turn of each kind (`hello`: a
// streaming reply; `crunch`: a worker task; `shell`: a process tree), a Stop once the turn is busy,
// then the time from sending the Stop to its answer (`stopped`: turn_aborted emitted) and to the
// stream's `status: cancelled` frame. Prints the median and range of each, in ms.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RUNS = Number(process.argv[2] ?? 20);
const MAIN = fileURLToPath(new URL('../../dist/examples/agent-server/main.js', import.meta.url));
const data = mkdtempSync(join(tmpdir(), 'fullstop-stop-latency-'));
const server = spawn(process.execPath, [MAIN, '--port', '0', '--data', data], { stdio: ['ignore', 'pipe', 'inherit'] });
const base = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (chunk) => {
    out += chunk;
    const match = /agent server: (http:\/\/\S+)/.exec(out);
    if (match) resolve(new URL(match[1]).origin);
  });
  server.once('exit', (code) => reject(new Error(`server exited (${code})`)));
});

/** Follows a session's stream; `wait(test)` resolves with the time the first frame passing `test` arrived. */
async function follow(sessionId) {
  const abort = new AbortController();
  const res = await fetch(`${base}/api/sessions/${sessionId}/events`, { signal: abort.signal });
  const seen = [];
  let wake = () => {};
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end; (end = buffer.indexOf('\n\n')) >= 0; buffer = buffer.slice(end + 2)) {
          const frame = Object.fromEntries(buffer.slice(0, end).split('\n').filter((l) => !l.startsWith(':'))
            .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]));
          if (frame.event) seen.push({ at: performance.now(), type: frame.event, data: JSON.parse(frame.data) });
        }
        wake();
      }
    } catch { /* closed */ }
  })();
  return {
    async wait(test) {
      for (;;) {
        const found = seen.find(test);
        if (found) return found.at;
        await new Promise((resolve) => { wake = resolve; });
      }
    },
    close: () => abort.abort(),
  };
}

const post = (path, body) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json());

/** When each kind of turn is busy: a token streamed, the task on a worker, the command's first line. */
const BUSY = {
  hello: (e) => e.type === 'say',
  crunch: (e) => e.type === 'tool_call' && e.data.name === 'crunch',
  shell: (e) => e.type === 'tool_progress',
};

const results = {};
for (const kind of Object.keys(BUSY)) {
  results[kind] = { answer: [], end: [] };
  for (let i = 0; i < RUNS; i++) {
    const sessionId = `lat-${kind}-${i}`;
    const stream = await follow(sessionId);
    const { turnId } = await post(`/api/sessions/${sessionId}/turns`, { prompt: kind === 'hello' ? 'hello there, tell me a long story' : kind });
    await stream.wait(BUSY[kind]);
    if (kind === 'crunch') await new Promise((resolve) => setTimeout(resolve, 50)); // on its worker, mid-phase
    const sent = performance.now();
    const answer = await post(`/api/sessions/${sessionId}/stop`, {});
    const answered = performance.now();
    if (answer.outcome !== 'stopped') throw new Error(`run ${i} (${kind}): ${JSON.stringify(answer)}`);
    const ended = await stream.wait((e) => e.type === 'status' && e.data.status === 'cancelled' && e.data.turnId === turnId);
    stream.close();
    results[kind].answer.push(answered - sent);
    results[kind].end.push(ended - sent);
  }
}

const summary = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const median = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  return `median ${median.toFixed(1)} ms, range ${s[0].toFixed(1)}-${s.at(-1).toFixed(1)} ms`;
};
for (const [kind, { answer, end }] of Object.entries(results)) {
  console.log(`${kind} (${answer.length} runs): stop answered ${summary(answer)}; status cancelled on the stream ${summary(end)}`);
}
server.kill('SIGTERM');
await new Promise((resolve) => server.once('exit', resolve));
rmSync(data, { recursive: true, force: true });
