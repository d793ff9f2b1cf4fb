/* app.js: the page of hearth serve: the assistant's chat (its tool calls as
 * they happen, consent as a dialog), the memory and the audit trail. Every
 * text from the server is someone's words (a mail, a tool's output): it is
 * shown with textContent, never as HTML. */
'use strict';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'hearth-token';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function headers(json) {
  const h = {};
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) h.Authorization = 'Bearer ' + token;
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

/* fetch with the token; a 401 asks for it (once) and throws. */
async function api(path, opts = {}) {
  const res = await fetch(path, {
    method: opts.method || 'GET',
    headers: headers(opts.body !== undefined),
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
    cache: 'no-store',
  });
  if (res.status === 401) {
    showToken(localStorage.getItem(TOKEN_KEY) ? 'That token was refused.' : '');
    throw new Error('the server wants its token');
  }
  return res;
}

async function errorText(res) {
  try {
    const j = await res.json();
    return (j.error && j.error.message) || res.statusText;
  } catch (e) {
    return res.statusText;
  }
}

/* ---- views ---- */
function show(view) {
  for (const v of ['chat', 'memory', 'audit', 'token'])
    $(v + '-view').hidden = v !== view;
  for (const b of document.querySelectorAll('nav button'))
    b.classList.toggle('on', b.dataset.view === view);
  if (view === 'memory') loadMemory('');
  if (view === 'audit') loadAudit();
  if (view === 'chat') $('request').focus();
}

function showToken(msg) {
  $('token-error').textContent = msg || '';
  show('token');
  $('token').focus();
}

/* ---- the event stream of POST /v1/hearth/ask ---- */
async function* events(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length) yield { event, data: JSON.parse(data.join('\n')) };
    }
  }
}

function argsText(a) {
  return typeof a === 'string' ? a : JSON.stringify(a);
}

/* ---- consent ---- */
let pendingConsent = null;

function askConsent(q, note) {
  pendingConsent = { id: q.id, note };
  $('consent-tool').textContent = q.tool;
  $('consent-args').textContent = JSON.stringify(q.arguments, null, 2);
  $('consent-why').textContent = q.why.startsWith('untrusted')
    ? 'Asked because ' + q.why + '.' : 'Your policy asks before this (' + q.why + ').';
  note.textContent = `? ${q.tool} waits for your answer`;
  $('consent').showModal();
}

async function answerConsent(answer) {
  const p = pendingConsent;
  pendingConsent = null;
  if ($('consent').open) $('consent').close();
  if (!p) return;
  p.note.textContent = `? answering ${answer}…`;
  const res = await api('/v1/hearth/consent/' + encodeURIComponent(p.id),
                        { method: 'POST', body: { answer } });
  if (!res.ok) p.note.textContent = '! ' + await errorText(res);
}

/* ---- the chat ---- */
function handle(ev, box, state) {
  const d = ev.data;
  switch (ev.event) {
    case 'call':
      box.insertBefore(el('div', 'call', `→ ${d.name} ${argsText(d.arguments)}`), state.answer);
      break;
    case 'result':
      box.insertBefore(el('div', 'result', d.status === 'ok'
        ? `  ok (${d.bytes} bytes of result)` : `  ${d.status}: ${d.detail.slice(0, 300)}`),
        state.answer);
      break;
    case 'consent':
      state.note = el('div', 'consent-note');
      box.insertBefore(state.note, state.answer);
      askConsent(d, state.note);
      break;
    case 'consent_answered':
      if (pendingConsent && pendingConsent.id === d.id) {
        pendingConsent = null;
        if ($('consent').open) $('consent').close();
      }
      if (state.note) state.note.textContent = `  ${d.answer} (${d.by})`;
      break;
    case 'text':
      state.answer.textContent += state.answer.textContent ? d.text : d.text.trimStart();
      break;
    case 'done':
      if (!state.answer.textContent && d.answer) state.answer.textContent = d.answer;
      for (const u of d.not_done || [])
        box.appendChild(el('div', 'not-done',
          `not ${u.effect === 'send' ? 'sent' : 'done'}: ${u.name} ${argsText(u.arguments)}: ${u.reason}`));
      if (d.error) box.appendChild(el('div', 'error', d.error));
      box.appendChild(el('div', 'done', `episode ${d.episode} · ${d.status}`));
      break;
  }
}

async function ask(text) {
  const box = el('div', 'exchange');
  box.appendChild(el('div', 'request', text));
  const state = { answer: el('div', 'answer'), note: null };
  box.appendChild(state.answer);
  $('log').appendChild(box);
  const res = await api('/v1/hearth/ask', { method: 'POST', body: { request: text } });
  if (!res.ok) {
    box.appendChild(el('div', 'error', await errorText(res)));
    return;
  }
  for await (const ev of events(res)) {
    handle(ev, box, state);
    $('log').scrollTop = $('log').scrollHeight;
  }
}

/* ---- memory and audit ---- */
async function loadMemory(q) {
  const list = $('memory-list');
  const res = await api('/v1/hearth/memory' + (q ? '?q=' + encodeURIComponent(q) : ''));
  list.replaceChildren();
  if (!res.ok) return list.appendChild(el('li', 'error', await errorText(res)));
  const j = await res.json();
  if (!j.data.length) list.appendChild(el('li', 'muted', q ? 'nothing matches' : 'nothing remembered yet'));
  for (const m of j.data) {
    const li = el('li');
    li.appendChild(el('code', null, `#${m.id}`));
    li.appendChild(el('span', null, `[${m.kind}${m.provenance && m.provenance !== 'user'
      ? ', ' + m.provenance : ''}] ${m.text}`));
    const b = el('button', null, 'Forget');
    b.type = 'button';
    b.addEventListener('click', async () => {
      const r = await api('/v1/hearth/memory/' + m.id, { method: 'DELETE' });
      if (r.ok) li.remove();
      else b.textContent = await errorText(r);
    });
    li.appendChild(b);
    list.appendChild(li);
  }
}

async function loadAudit() {
  const body = $('audit').tBodies[0];
  const res = await api('/v1/hearth/audit?limit=100');
  body.replaceChildren();
  if (!res.ok) return body.appendChild(el('tr', 'error', await errorText(res)));
  for (const a of (await res.json()).data) {
    const tr = el('tr');
    const when = a.at ? new Date(a.at * 1000).toLocaleString() : '';
    for (const v of [when, a.tool, a.decision, a.by, a.status, a.args])
      tr.appendChild(el('td', null, v === null || v === undefined ? '' : String(v)));
    body.appendChild(tr);
  }
}

/* ---- start ---- */
async function start() {
  try {
    const res = await api('/v1/models');
    const j = await res.json();
    $('model').textContent = j.data[0].id;
    show('chat');
  } catch (e) { /* the token form is showing */ }
}

document.addEventListener('DOMContentLoaded', () => {
  for (const b of document.querySelectorAll('nav button'))
    b.addEventListener('click', () => show(b.dataset.view));
  for (const a of ['yes', 'no', 'always'])
    $('consent-' + a).addEventListener('click', () => answerConsent(a));
  $('consent').addEventListener('cancel', (e) => { e.preventDefault(); answerConsent('no'); });
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    localStorage.setItem(TOKEN_KEY, $('token').value.trim());
    $('token').value = '';
    start();
  });
  $('ask-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('request').value.trim();
    if (!text) return;
    $('request').value = '';
    $('send').disabled = true;
    try { await ask(text); } catch (err) { /* said on the page */ }
    $('send').disabled = false;
    $('request').focus();
  });
  $('request').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('ask-form').requestSubmit(); }
  });
  $('memory-form').addEventListener('submit', (e) => { e.preventDefault(); loadMemory($('memory-q').value.trim()); });
  start();
});
