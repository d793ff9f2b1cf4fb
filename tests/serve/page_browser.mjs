// page_browser.mjs: the page of hearth serve in a real headless browser
// (Debian's chromium through playwright-core): the token entered once, a
// request, its consent dialog answered, the answer shown, the memory and
// audit views; nothing fetched from anywhere but the server, no script
// from what the page shows, and requests from another origin refused.
// Screenshots go to $NODE_DIR/screens (named in the output).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { assert, startServer, test } from './harness.mjs';

const screens = path.join(process.env.NODE_DIR, 'screens');
fs.rmSync(screens, { recursive: true, force: true });
fs.mkdirSync(screens, { recursive: true });
const server = await startServer();
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hx_chromium_'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--no-first-run'],
  viewport: { width: 1000, height: 700 },
});
const page = context.pages()[0] || await context.newPage();
const elsewhere = [], errors = [];
await context.route('**/*', (route) => {
  const url = route.request().url();
  if (url.startsWith(server.base + '/') || url.startsWith(`http://localhost:${server.port}/`)) return route.continue();
  elsewhere.push(url);
  return route.abort();
});
page.on('pageerror', (e) => errors.push(String(e)));

async function shot(name) {
  const file = path.join(screens, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`# screenshot: ${file}`);
}

// Sends a request from the page and waits for its end (the episode line).
async function ask(text) {
  const before = await page.locator('.done').count();
  await page.fill('#request', text);
  await page.click('#send');
  return before;
}

await test('token_once', async () => {
  await page.goto(server.base + '/');
  await page.waitForSelector('#token-view:not([hidden])');
  await shot('1-token');
  await page.fill('#token', 'not-the-token-0000000000000000000000');
  await page.click('#token-form button');
  await page.waitForFunction(() => document.getElementById('token-error').textContent.includes('refused'));
  await page.fill('#token', server.token);
  await page.click('#token-form button');
  await page.waitForSelector('#chat-view:not([hidden])');
  assert(await page.textContent('#model') === 'hearth-tiny.gguf', 'the model is named');
  await page.reload(); // kept in this browser: no question the second time
  await page.waitForSelector('#chat-view:not([hidden])');
  assert(await page.isHidden('#token-view'), 'the token was asked again');
});

await test('consent_dialog', async () => {
  const before = await ask("Remember that Bob's email is bob@example.org");
  await page.waitForSelector('#consent[open]');
  assert(await page.textContent('#consent-tool') === 'memory.remember', 'the dialog names the call');
  assert((await page.textContent('#consent-args')).includes('bob@example.org'), 'and its arguments');
  await shot('2-consent');
  await page.click('#consent-yes');
  await page.waitForFunction((n) => document.querySelectorAll('.done').length > n, before, { timeout: 120000 });
  assert(!(await page.isVisible('#consent')), 'the dialog closed');
  const calls = await page.locator('.call').allTextContents();
  assert(calls.some((c) => c.includes('memory.remember')), `the call shown: ${calls}`);
  const answer = await page.locator('.answer').last().textContent();
  assert(answer.trim().length > 0, 'an answer shown');
  console.log(`# answer: ${JSON.stringify(answer)}`);
  await shot('3-answer');
});

await test('memory_and_audit', async () => {
  await page.click('nav button[data-view=memory]');
  await page.waitForSelector('#memory-list li span');
  assert((await page.textContent('#memory-list')).includes("Bob's email"), 'the memory is listed');
  await shot('4-memory');
  await page.click('nav button[data-view=audit]');
  await page.waitForSelector('#audit tbody tr');
  const row = await page.textContent('#audit tbody tr');
  assert(row.includes('memory.remember') && row.includes('user'), `audit row ${row}`);
  await shot('5-audit');
  await page.click('nav button[data-view=memory]');
  await page.click('#memory-list li button');
  await page.waitForFunction(() => !document.getElementById('memory-list').textContent.includes("Bob's email"));
  await page.click('nav button[data-view=chat]');
});

await test('text_stays_text', async () => {
  const hostile = '<img src=x onerror="window.pwned=1">Is <b>this</b> bold?';
  const before = await ask(hostile);
  await page.waitForFunction((n) => document.querySelectorAll('.done').length > n, before, { timeout: 120000 });
  assert(await page.locator('.request').last().textContent() === hostile, 'shown as typed');
  assert(await page.locator('#log img, #log b').count() === 0, 'no element made from text');
  assert(await page.evaluate(() => window.pwned) === undefined, 'no script ran');
});

const auditCount = () => page.evaluate(async (t) =>
  (await (await fetch('/v1/hearth/audit', { headers: { Authorization: 'Bearer ' + t } })).json()).data.length, server.token);

await test('other_origins_refused', async () => {
  const before = await auditCount();
  // the page's own origin may call the API (control) ...
  const own = await page.evaluate(async (t) => (await fetch('/v1/models', { headers: { Authorization: 'Bearer ' + t } })).status, server.token);
  assert(own === 200, `own origin: ${own}`);
  // ... another origin (localhost is not 127.0.0.1 to a browser) may not,
  // even with the token: no CORS, and the server refuses its Origin
  const other = await context.newPage();
  await other.goto(`http://localhost:${server.port}/icon.svg`);
  const res = await other.evaluate(async ([base, t]) => {
    try {
      const r = await fetch(base + '/v1/hearth/ask', { method: 'POST', body: '{"request": "hi"}',
        headers: { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' } });
      return `status ${r.status}`;
    } catch (e) { return 'refused'; }
  }, [server.base, server.token]);
  assert(res === 'refused', `a cross-origin call got ${res}`);
  const simple = await other.evaluate(async (base) => {
    try { await fetch(base + '/v1/hearth/ask', { method: 'POST', mode: 'no-cors', body: '{"request": "hi"}' }); return 'sent'; } catch (e) { return 'refused'; }
  }, server.base);
  const models = await other.evaluate(async ([base, t]) => {
    try { return String((await fetch(base + '/v1/models', { headers: { Authorization: 'Bearer ' + t } })).status); } catch (e) { return 'refused'; }
  }, [server.base, server.token]);
  assert(models === 'refused', `a cross-origin read got ${models}`);
  await other.close();
  const after = await auditCount();
  assert(after === before, `no call ran for another origin (${before} -> ${after}; no-cors: ${simple})`);
});

await test('nothing_from_elsewhere', async () => {
  assert(elsewhere.length === 0, `requests elsewhere: ${elsewhere}`);
  assert(errors.length === 0, `page errors: ${errors}`);
});

await context.close();
fs.rmSync(profile, { recursive: true, force: true });
await server.stop();
