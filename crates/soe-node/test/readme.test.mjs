// The READMEs' code runs as written: each ```js block marked `<!-- readme-test: ... -->` in this
// package's README and in the workspace README is saved as a CommonJS file beside a
// node_modules/soe-node that links to this package, with its port replaced by a free one. A
// `server` block keeps running; the `client` blocks after it run against it and must exit by
// themselves, cleanly, with no warning (a listener per message would show as
// MaxListenersExceededWarning). A `script` block runs alone and must exit cleanly. The
// workspace README has servers only: this package's client runs against each.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import dgram from 'node:dgram';
import path from 'node:path';
import { pkgDir, reap } from './helpers.mjs';
import soe from '../index.js';

/** The marked blocks of a README (this package's by default), in order: { kind, code }. */
function blocks(readme = path.join(pkgDir, 'README.md')) {
  const text = readFileSync(readme, 'utf8');
  const found = [];
  const re = /<!-- readme-test: (server|client|script) -->\n```js\n([\s\S]*?)\n```/g;
  for (let m = re.exec(text); m; m = re.exec(text)) found.push({ kind: m[1], code: m[2] });
  return found;
}

async function freePort() {
  const socket = dgram.createSocket('udp4');
  await new Promise((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise((resolve) => socket.close(resolve));
  return port;
}

/** Runs `file`; resolves with its status and output (killed after `deadlineMs`). */
function run(t, file, cwd, deadlineMs) {
  const child = reap(t, spawn(process.execPath, [file], { cwd, stdio: ['ignore', 'pipe', 'pipe'] }));
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
  });
  return { child, done, output: () => stdout + stderr };
}

/** Waits until an SOE server answers on `port`. */
async function serving(port, output) {
  for (let i = 0; i < 100; i++) {
    try {
      const session = await soe.SoeClient.connect(`127.0.0.1:${port}`, { connectTimeout: 200, protocol: 'CGAPI_527' });
      await session.close();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error(`nothing serves on ${port}:\n${output()}`);
}

/** Runs `found` (marked blocks) in order, as the header says, in a directory of its own. */
async function runBlocks(t, found) {
  const dir = mkdtempSync(path.join(tmpdir(), 'soe-node-readme-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, 'node_modules'));
  symlinkSync(pkgDir, path.join(dir, 'node_modules', 'soe-node'), 'dir');
  let server = null;
  let n = 0;
  const stopServer = async () => {
    if (server === null) return;
    server.child.kill('SIGTERM');
    await server.done;
    server = null;
  };
  t.after(stopServer);
  for (const block of found) {
    const file = path.join(dir, `block${n++}.cjs`);
    if (block.kind === 'server') {
      await stopServer();
      const port = await freePort();
      writeFileSync(file, block.code.replace(/\b(20042|1115)\b/g, String(port)));
      server = run(t, file, dir, 100_000);
      server.port = port;
      await serving(port, server.output);
      continue;
    }
    const code = block.kind === 'client' ? block.code.replace(/\b20042\b/g, String(server.port)) : block.code;
    writeFileSync(file, code);
    const { status, signal, stdout, stderr } = await run(t, file, dir, 30_000).done;
    assert.equal(signal, null, `block ${n - 1} (${block.kind}) was still running 30 s later:\n${stdout}${stderr}`);
    assert.equal(status, 0, `block ${n - 1} (${block.kind}):\n${stdout}${stderr}`);
    assert.equal(stderr, '', `block ${n - 1} (${block.kind}) wrote to stderr`);
    if (block.kind === 'client') assert.match(stdout, /^echoed 10000 of 10000, rtt [\d.]+ ms, \d+ resends\n$/);
    else assert.equal(stdout, 'welcome, player1\n');
  }
}

test('the README code blocks run as written', { timeout: 120_000 }, async (t) => {
  const found = blocks();
  assert.deepEqual(found.map((b) => b.kind), ['server', 'client', 'script', 'server'], 'the marked blocks');
  await runBlocks(t, [...found, { kind: 'client', code: found[1].code }]);
});

test("the workspace README's servers run as written, this package's client against each", { timeout: 120_000 }, async (t) => {
  const found = blocks(path.join(pkgDir, '..', '..', 'README.md'));
  assert.deepEqual(found.map((b) => b.kind), ['server', 'server'], 'the marked blocks');
  assert.match(found[0].code, /require\('soe-node'\)/);
  assert.match(found[1].code, /require\('soe-node\/h1z1'\)/);
  const client = blocks().find((b) => b.kind === 'client');
  await runBlocks(t, found.flatMap((server) => [server, client]));
});
