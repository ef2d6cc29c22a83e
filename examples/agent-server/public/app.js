// The agent page: one session (?session=<id>), its event stream, Send and Stop. Plain script, no
// build step. Every change of what the page shows comes from the session's events — its ledger
// entries (fullstop/http's eventStream), then live ones — so a reload or a second tab on the same
// session replays to the same state. Only the stop's timeline comes from the Stop's own answer.
'use strict';

const $ = (id) => document.getElementById(id);
const el = (tag, className, text) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
};

/** A random id: getRandomValues works on plain http too (randomUUID needs a secure context). */
const randomId = (prefix, bytes) => prefix + Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, '0')).join('');

const sessionId = (() => {
  const params = new URLSearchParams(location.search);
  let id = params.get('session');
  if (!id || !/^[\w.:-]{1,100}$/.test(id)) {
    id = randomId('s-', 6);
    params.set('session', id);
    history.replaceState(null, '', `${location.pathname}?${params}`);
  }
  return id;
})();
const api = `/api/sessions/${encodeURIComponent(sessionId)}`;

// The bearer token, when the server has one: its printed URL carries it as `#token=…` (a fragment
// never reaches a server or a log). Kept for this tab and taken out of the address bar.
const token = (() => {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const given = fragment.get('token');
  if (given) {
    sessionStorage.setItem('fullstop-token', given);
    fragment.delete('token');
    const rest = fragment.toString();
    history.replaceState(null, '', `${location.pathname}${location.search}${rest ? `#${rest}` : ''}`);
  }
  return sessionStorage.getItem('fullstop-token');
})();
/** Headers every API request carries. */
const authHeaders = token ? { authorization: `Bearer ${token}` } : {};
$('session').textContent = sessionId;

/** Characters of a running command's output the page keeps under its call (the newest). */
const LIVE_OUTPUT_CHARS = 20000;

/** Per turn: its DOM container, the text span being streamed into, its tool rows and questions. */
const turns = new Map();
/** Turns whose end has been seen (a late 202 must not set `running` again). */
const ended = new Set();
/** Turns this page asked to stop (their turn_started must not say `running` again). */
const stopping = new Set();
let current; // turnId of the turn shown as running, if any
let drawn; // turnId whose stop timeline is shown

function setStatus(status) {
  const node = $('status');
  node.textContent = status;
  node.className = `status ${status}`;
  $('stop').disabled = status !== 'running';
  $('send').disabled = status === 'running' || status === 'cancelling';
}

function showError(message) {
  const node = $('error');
  node.textContent = message;
  node.hidden = !message;
}

function turnView(turnId, prompt) {
  let view = turns.get(turnId);
  if (!view) {
    const root = el('div', 'turn');
    root.dataset.turnId = turnId;
    if (prompt) root.append(el('p', 'user', prompt));
    $('transcript').append(root);
    view = { root, text: null, tools: new Map(), questions: new Map() };
    turns.set(turnId, view);
  }
  return view;
}

function scrollDown() {
  const t = $('transcript');
  t.scrollTop = t.scrollHeight;
}

/** A terminal status's text on the page. */
const END_TEXT = { completed: () => 'completed', failed: (e) => `failed: ${e.detail ?? e.reason ?? 'error'}`, cancelled: (e) => `cancelled (${e.reason})`, interrupted: (e) => `interrupted (${e.reason})` };

const handlers = {
  turn_started({ turnId, input }) {
    turnView(turnId, typeof input === 'string' ? input : undefined);
    current = turnId;
    $('report').hidden = true;
    if (!ended.has(turnId)) setStatus(stopping.has(turnId) ? 'cancelling' : 'running');
  },
  say({ turnId, text }) {
    const view = turnView(turnId);
    if (!view.text) {
      view.text = el('p', 'say');
      view.root.append(view.text);
    }
    view.text.textContent += text;
  },
  tool_call({ turnId, callId, name, args, at }) {
    const view = turnView(turnId);
    view.text = null; // the next tokens start a new paragraph below the tool
    const row = el('div', 'tool running');
    row.dataset.callId = callId;
    row.append(el('span', 'name', `${name}(${JSON.stringify(args)})`), el('span', 'state', 'running'));
    const started = performance.now();
    const state = row.querySelector('.state');
    const timer = setInterval(() => { state.textContent = `running ${((performance.now() - started) / 1000).toFixed(1)} s`; }, 100);
    view.tools.set(callId, { row, timer, started, at, live: null });
    view.root.append(row);
  },
  tool_progress({ turnId, callId, data }) {
    // A running command's output, as it comes: shown under its call, kept after the call ends.
    const tool = turnView(turnId).tools.get(callId);
    if (!tool || !data || typeof data.text !== 'string') return;
    if (!tool.live) {
      tool.live = el('pre', 'live');
      tool.live.dataset.testid = 'tool-output';
      tool.row.append(tool.live);
    }
    const chunk = el('span', data.stream === 'stderr' ? 'stderr' : 'stdout', data.text);
    tool.live.append(chunk);
    // The newest output stays in view; the oldest goes past a bound (a build prints megabytes).
    while (tool.live.textContent.length > LIVE_OUTPUT_CHARS && tool.live.childNodes.length > 1) tool.live.firstChild.remove();
  },
  tool_output({ turnId, callId, output, success }) {
    const tool = turnView(turnId).tools.get(callId);
    if (!tool) return;
    finishTool(tool, success ? 'done' : 'failed', typeof output === 'string' ? output : JSON.stringify(output));
  },
  tool_aborted({ turnId, callId, at }) {
    const tool = turnView(turnId).tools.get(callId);
    if (!tool || !tool.row.classList.contains('running')) return;
    finishTool(tool, `aborted after ${((at - tool.at) / 1000).toFixed(1)} s`, '');
  },
  question({ turnId, questionId, question }) {
    const view = turnView(turnId);
    const box = el('div', 'question');
    box.dataset.testid = 'question';
    box.append(el('span', 'text', typeof question === 'string' ? question : JSON.stringify(question)));
    const form = el('form');
    const input = el('input');
    input.dataset.testid = 'answer';
    input.placeholder = 'your answer';
    const button = el('button', '', 'Answer');
    button.type = 'submit';
    button.dataset.testid = 'answer-send';
    form.append(input, button);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      button.disabled = true;
      const answer = input.value.trim() || 'yes';
      const reply = await post(`/api/questions/${encodeURIComponent(questionId)}/answer`, { answer });
      closeQuestion(box, reply && reply.accepted ? `answered: ${answer}` : 'not accepted (the turn is over)');
    });
    box.append(form);
    view.questions.set(questionId, box);
    view.root.append(box);
    input.focus();
  },
  turn_aborted({ turnId }) {
    // A stop this page did not send: its timeline from the instance that ran the turn, if it is this one.
    if (turnId !== current || drawn === turnId) return;
    fetch(`${api}/turns/${encodeURIComponent(turnId)}/report`, { headers: authHeaders })
      .then((res) => (res.ok ? res.json() : undefined))
      .then((report) => { if (report && turnId === current) drawReport(report, turnId); }, () => {});
  },
  status(entry) {
    const { turnId, status } = entry;
    if (status === 'cancelling') {
      if (turnId === current && !ended.has(turnId)) setStatus('cancelling');
    } else if (END_TEXT[status]) endTurn(turnId, status, END_TEXT[status](entry));
  },
};

function finishTool(tool, state, output) {
  clearInterval(tool.timer);
  tool.row.className = `tool ${state.split(' ')[0]}`;
  tool.row.querySelector('.state').textContent = state;
  // What the command had printed stays; after a stop it is what the model is told remained.
  if (tool.live && state.startsWith('aborted')) tool.live.before(el('span', 'live-label', 'output before the stop:'));
  if (output) tool.row.append(el('span', 'output', output.length > 300 ? `${output.slice(0, 300)}…` : output));
}

function closeQuestion(box, text) {
  // Only a live question keeps the test hooks, so there is never more than one `question` box.
  for (const node of [box, ...box.querySelectorAll('[data-testid]')]) delete node.dataset.testid;
  box.querySelector('form')?.remove();
  box.append(el('span', 'output', ` — ${text}`));
}

function endTurn(turnId, status, text) {
  if (ended.has(turnId)) return;
  ended.add(turnId);
  const view = turnView(turnId);
  for (const tool of view.tools.values()) {
    if (!tool.row.classList.contains('running')) continue;
    const after = `after ${((performance.now() - tool.started) / 1000).toFixed(1)} s`;
    finishTool(tool, status === 'cancelled' ? `aborted ${after}` : 'failed', '');
  }
  for (const box of view.questions.values()) if (box.querySelector('form')) closeQuestion(box, status);
  view.root.append(el('p', `end ${status}`, text));
  if (turnId === current || current === undefined) setStatus(status);
  scrollDown();
}

/** The StopReport as a timeline: one row per phase of the stop, bars on one shared time axis. */
function drawReport(report, turnId) {
  drawn = turnId;
  const phases = [
    ['signal', 0, report.signalledAt],
    ['settle', report.signalledAt, report.settledAt],
    ['hard stop', report.settledAt, report.hardStopAt],
    ['history', report.hardStopAt, report.markerAt],
    ['flush', report.markerAt, report.flushedAt],
    ['emit', report.flushedAt, report.emittedAt],
  ];
  const total = Math.max(report.emittedAt, 0.001);
  const box = $('report');
  box.replaceChildren();
  box.append(el('h2', '', `Stopped everywhere in ${ms(report.emittedAt)}`));
  const hard = report.hardStopped || {};
  box.append(el('p', 'facts', `reason ${report.reason} · grace ${report.graceMs} ms · ` +
    `${report.settledCooperatively ? 'everything settled within the grace' : 'hard stop needed'} · hard-stopped: ` +
    `${hard.workers ?? 0} workers, ${hard.processGroups ?? 0} process groups, ${hard.questions ?? 0} questions`));
  for (const [name, from, to] of phases) {
    const row = el('div', 'phase');
    row.dataset.phase = name;
    const track = el('div', 'track');
    const bar = el('div', 'bar');
    bar.style.left = `${(from / total) * 100}%`;
    bar.style.width = `${(Math.max(to - from, 0) / total) * 100}%`;
    track.append(bar);
    row.append(el('span', 'label', name), track, el('span', 'time', `${ms(to - from)} → +${ms(to)}`));
    box.append(row);
  }
  box.hidden = false;
}

function ms(value) {
  return value < 1 ? `${(value * 1000).toFixed(0)} µs` : `${value.toFixed(1)} ms`;
}

async function post(path, body) {
  try {
    const res = await fetch(path, { method: 'POST', headers: { ...authHeaders, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const data = await res.json();
    if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
    showError('');
    return data;
  } catch (error) {
    showError(error.message);
    return undefined;
  }
}

$('composer').addEventListener('submit', async (event) => {
  event.preventDefault();
  const prompt = $('prompt').value.trim();
  if (!prompt || $('send').disabled) return;
  // The page names the turn, and Stop works from this moment on: a Stop pressed before this POST
  // lands names the turn too, and the server keeps it until the turn starts (it starts cancelled).
  const turnId = randomId('turn-', 16);
  current = turnId;
  setStatus('running');
  const reply = await post(`${api}/turns`, { prompt, turnId });
  if (reply && reply.node) $('node').textContent = reply.node; // the instance that runs the turn
  if (!reply && current === turnId && !ended.has(turnId)) setStatus('idle');
});

$('prompt').addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey) {
    event.preventDefault();
    $('composer').requestSubmit();
  }
});

$('stop').addEventListener('click', async () => {
  const turnId = current;
  stopping.add(turnId);
  setStatus('cancelling');
  const answer = await post(`${api}/stop`, { turnId });
  // `refused`: the server could not keep a stop for a turn that has not started (post() shows why).
  // A stop that failed, or found nothing to stop (the turn ended by itself meanwhile), leaves the
  // status to the turn's own events; a stop under way, or kept for a turn that has not started
  // yet (`pending`), keeps `cancelling` until turn_aborted.
  const underWay = answer && ['stopped', 'cancelling', 'pending'].includes(answer.outcome);
  // The stop's timeline is in its answer (the history has the stop's entries, not its timings).
  if (answer && answer.outcome === 'stopped' && answer.report && turnId === current) drawReport(answer.report, turnId);
  if (!underWay) {
    stopping.delete(turnId);
    if (!ended.has(turnId) && current === turnId) setStatus('running');
  }
});

/**
 * Follows the session's Server-Sent Events over fetch (EventSource cannot send the token): on a
 * dropped connection it reconnects after the server's `retry` with `Last-Event-ID`, as
 * EventSource would, so nothing is missed and nothing arrives twice.
 */
async function follow() {
  let lastEventId;
  let retryMs = 1000;
  for (;;) {
    try {
      const headers = { ...authHeaders, accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const res = await fetch(`${api}/events`, { headers, cache: 'no-store' });
      if (!res.ok) {
        const data = await res.json().catch(() => ({}));
        showError(data.error || `event stream: HTTP ${res.status}`);
        if (res.status === 401) return; // a wrong token stays wrong
      } else {
        showError('');
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = {};
            for (const line of frame.split('\n')) {
              if (line.startsWith(':')) continue;
              const colon = line.indexOf(':');
              event[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
            }
            if (event.retry) retryMs = Number(event.retry) || retryMs;
            if (event.id !== undefined) lastEventId = event.id;
            const handle = handlers[event.event];
            if (handle && event.data !== undefined) {
              handle(JSON.parse(event.data));
              scrollDown();
            }
          }
        }
      }
    } catch {
      // The connection dropped: reconnect below.
    }
    showError('connection lost; reconnecting…');
    await new Promise((resolve) => setTimeout(resolve, retryMs));
  }
}
void follow();

fetch('/healthz', { headers: authHeaders }).then((r) => r.json()).then((h) => { if ($('node').textContent === '…') $('node').textContent = h.nodeId; }, () => {});
