// harness.mjs: shared by the node tests of hearth serve: results as the
// test runner reads them ("ok NAME", "FAIL NAME: why"), and a `hearth
// serve` started in a copy of the fixture world on a UNIX socket and a
// free loopback port.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// A failure outside a test (the server or the browser not starting) is
// one FAIL line; a server started here never outlives this process.
const servers = new Set();
process.on('unhandledRejection', (e) => {
  console.log(`FAIL setup: ${String((e && e.stack) || e).split('\n').slice(0, 3).join(' | ')}`);
  process.exit(1);
});
process.on('SIGTERM', () => process.exit(143));
process.on('exit', () => { for (const p of servers) p.kill('SIGKILL'); });

export async function test(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    const why = String((e && e.stack) || e).split('\n').slice(0, 3).join(' | ');
    console.log(`FAIL ${name}: ${why}`);
    process.exitCode = 1;
  }
}

export function assert(cond, what) {
  if (!cond) throw new Error(what);
}

// Starts hearth serve; resolves to {port, token, dir, base, stop()}.
export async function startServer(args = []) {
  const root = process.env.HEARTH_ROOT;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hx_node_'));
  fs.cpSync(path.join(root, 'tests/fixtures/world'), path.join(dir, 'home/config'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'home/config/files'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'run'), { mode: 0o700 });
  const proc = spawn(process.env.HEARTH_BIN,
    ['serve', '--socket', path.join(dir, 'run/hearth.sock'), '--listen', '127.0.0.1:0', ...args], {
      cwd: root,
      env: { ...process.env, HEARTH_HOME: path.join(dir, 'home'), HEARTH_NOW: '2026-12-01T09:00:00+01:00' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  servers.add(proc);
  proc.once('exit', () => servers.delete(proc));
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('hearth serve did not start: ' + log)), 60000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`hearth serve exited (${code}): ${log}`)); });
  });
  const token = fs.readFileSync(path.join(dir, 'home/config/serve-token'), 'utf8').trim();
  const stop = async () => {
    const done = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await done;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { port, token, dir, base: `http://127.0.0.1:${port}`, stop, log: () => log };
}
