// bench/echo-server.mjs keeps its contract: one line `listening <port>` when ready, every echo
// right under `soe load` on either API, and a clean exit on SIGTERM, SIGINT or stdin's end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { runSoe } from '../scripts/soe-tool.mjs';
import { T, reap, pkgDir, soeBin, needsSoe } from './helpers.mjs';

const script = path.join(pkgDir, 'bench', 'echo-server.mjs');

/** Starts the server; resolves once it printed its line, with the child, port and exit. */
function start(t, args, stdin = 'pipe') {
  const child = reap(t, spawn(process.execPath, [script, ...args], { stdio: [stdin, 'pipe', 'pipe'] }));
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('close', (status, signal) => resolve({ status, signal, stdout, stderr })));
  const ready = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = /^listening (\d+)\n/.exec(stdout);
      if (m) resolve(Number(m[1]));
    });
    exited.then(() => reject(new Error(`exited before listening: ${stdout}${stderr}`)));
  });
  return { child, ready, exited };
}

for (const api of ['addon', 'h1z1']) {
  test(`echo-server.mjs --api ${api}: listening, every echo right, exit on stdin's end and on SIGTERM`, { ...T, skip: needsSoe }, async (t) => {
    const server = start(t, ['--port', '0', '--api', api, '--crc-length', '2', '--udp-length', '512']);
    const port = await server.ready;
    assert.ok(port > 0);
    const { status, out } = await runSoe(soeBin, ['load', '--sessions', '2', '--messages', '300', '--size', '1-2000', '--depth', '8', '--json', `127.0.0.1:${port}`]);
    assert.equal(status, 0, out);
    const summary = JSON.parse(out.slice(out.indexOf('{')));
    assert.equal(summary.messages_verified, 600, out);
    server.child.stdin.end();
    const end = await server.exited;
    assert.equal(end.status, 0, end.stderr);
    assert.equal(end.stdout, `listening ${port}\n`, 'one line on stdout');
    // With stdin at /dev/null, a signal stops it.
    const other = start(t, ['--api', api], 'ignore');
    await other.ready;
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(other.child.exitCode, null, 'still running with stdin at /dev/null');
    other.child.kill('SIGTERM');
    const stopped = await other.exited;
    assert.equal(stopped.status, 0, stopped.stderr);
    const interrupted = start(t, ['--api', api]);
    await interrupted.ready;
    interrupted.child.kill('SIGINT');
    assert.equal((await interrupted.exited).status, 0);
  });
}

test('echo-server.mjs refuses bad flags on stderr with status 1', T, async (t) => {
  const bad = start(t, ['--api', 'nope']);
  bad.ready.catch(() => {});
  const { status, stdout, stderr } = await bad.exited;
  assert.equal(status, 1);
  assert.equal(stdout, '');
  assert.match(stderr, /--api takes addon or h1z1/);
});

for (const api of ['addon', 'h1z1']) {
  test(`echo-server.mjs --api ${api} --event-thread js: every echo right`, { ...T, skip: needsSoe }, async (t) => {
    const server = start(t, ['--port', '0', '--api', api, '--event-thread', 'js']);
    const port = await server.ready;
    const { status, out } = await runSoe(soeBin, ['load', '--sessions', '2', '--messages', '100', '--size', '1-2000', '--depth', '8', '--json', `127.0.0.1:${port}`]);
    assert.equal(status, 0, out);
    assert.equal(JSON.parse(out.slice(out.indexOf('{'))).messages_verified, 200, out);
    server.child.stdin.end();
    assert.equal((await server.exited).status, 0);
  });
}

test('echo-server.mjs refuses a bad --event-thread', T, async (t) => {
  const bad = start(t, ['--event-thread', 'main']);
  bad.ready.catch(() => {});
  const { status, stderr } = await bad.exited;
  assert.equal(status, 1);
  assert.match(stderr, /--event-thread takes pump or js/);
});
