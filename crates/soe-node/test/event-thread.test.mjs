// eventThread: the endpoint driven on its own pump thread or on the JS thread's event loop
// (libuv), with the same events either way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import soe from '../index.js';
import { SOEServer } from '../h1z1.js';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { T, release, reap, echoServer, collect, runNode, importPackage, pkgDir } from './helpers.mjs';

const { SoeServer, SoeClient } = soe;

test("eventThread says where the endpoint runs: 'js' by default or when asked for, else the pump", T, async (t) => {
  const js = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread: 'js' }));
  const pump = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread: 'pump' }));
  const byDefault = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  assert.equal(byDefault.eventThread, 'js');
  assert.equal(js.eventThread, 'js');
  assert.equal(pump.eventThread, 'pump');
  assert.throws(() => new SoeServer({ eventThread: 'main' }), { code: 'ERR_INVALID_ARG_VALUE', message: /options\.eventThread/ });
});

test("the h1z1 facade's start() reads eventThread", T, async (t) => {
  for (const where of ['js', 'pump']) {
    const server = new SOEServer(0, Buffer.alloc(0));
    server._serverAddress = '127.0.0.1';
    server.eventThread = where;
    release(t, server);
    server.start();
    assert.equal(server._server.eventThread, where);
  }
});

for (const [server, client] of [['js', 'js'], ['js', 'pump'], ['pump', 'js']]) {
  test(`a ${server} server echoes a ${client} client's messages, reliable and unreliable, in order`, T, async (t) => {
    const echo = await echoServer(t, { eventThread: server });
    assert.equal(echo.eventThread, server);
    const endpoint = release(t, new SoeClient({ eventThread: client }));
    assert.equal(endpoint.eventThread, client);
    const session = await endpoint.connect(`127.0.0.1:${echo.address().port}`);
    const count = 300;
    const got = collect(session, count);
    for (let i = 0; i < count; i++) {
      // Every tenth a 5 KB one (fragments); unreliable ones are small.
      if (i % 3 === 0) session.sendUnreliable(Buffer.from(`u${i}`));
      else session.send(Buffer.alloc(i % 10 === 1 ? 5000 : 20, i));
    }
    const messages = await got;
    const reliable = messages.filter(([, info]) => info.kind === 'reliable').map(([m]) => m);
    assert.equal(messages.length - reliable.length, Math.ceil(count / 3));
    assert.equal(reliable.length, count - Math.ceil(count / 3));
    let n = 0;
    for (let i = 0; i < count; i++) {
      if (i % 3 === 0) continue;
      assert.deepEqual(reliable[n++], Buffer.alloc(i % 10 === 1 ? 5000 : 20, i));
    }
    const closed = new Promise((resolve) => session.once('disconnect', resolve));
    await echo.close();
    assert.equal(await closed, 'managerDeleted');
  });
}

test("on the JS thread, an endpoint that ended lets the process exit, and unref() lets an open one", T, async (t) => {
  const server = await echoServer(t);
  const run = await runNode(t, `${importPackage}
    const client = new soe.SoeClient({ eventThread: 'js' });
    const session = await client.connect('127.0.0.1:${server.address().port}');
    const echo = new Promise((resolve) => session.once('message', resolve));
    session.send(Buffer.from('ping'));
    console.log(String(await echo), client.eventThread);
    await client.close();
    const open = new soe.SoeClient({ eventThread: 'js' });
    await open.connect('127.0.0.1:${server.address().port}');
    open.unref();
    process.on('exit', () => console.log('exit'));`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.stdout, 'ping js\nexit\n', run.stderr);
  const kept = await runNode(t, `${importPackage}
    const client = new soe.SoeClient({ eventThread: 'js' });
    await client.connect('127.0.0.1:${server.address().port}');
    client.unref();
    client.ref();
    setTimeout(() => { console.log('still here'); client.close(); }, 300);`);
  assert.equal(kept.stdout, 'still here\n', kept.stderr);
  assert.equal(kept.killed, false);
});

test('on the JS thread, a listener that throws reaches uncaughtException and the endpoint goes on', T, async (t) => {
  const server = await echoServer(t);
  const run = await runNode(t, `${importPackage}
    const client = new soe.SoeClient({ eventThread: 'js' });
    const session = await client.connect('127.0.0.1:${server.address().port}');
    let thrown = 0;
    process.on('uncaughtException', (e) => { thrown++; console.log('caught', e.message); });
    const seen = [];
    session.on('message', (m) => {
      seen.push(String(m));
      if (seen.length === 1) throw new Error('boom');
      if (seen.length === 2) { console.log(seen.join(' '), thrown); client.close(); }
    });
    session.send(Buffer.from('a'));
    setTimeout(() => session.send(Buffer.from('b')), 50);`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.stdout, 'caught boom\na b 1\n', run.stderr);
});

test('on the JS thread, a worker that ends with its endpoints open ends cleanly', T, async (t) => {
  // The worker's loop closes after it ends: open libuv handles there abort the process.
  const run = await runNode(t, `
    import { Worker } from 'node:worker_threads';
    const index = ${JSON.stringify(path.join(pkgDir, 'index.js'))};
    const w = new Worker(\`
      const soe = require(\${JSON.stringify(index)});
      const { parentPort } = require('node:worker_threads');
      (async () => {
        const server = await soe.SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread: 'js' });
        const session = await soe.SoeClient.connect('127.0.0.1:' + server.address().port, { eventThread: 'js' });
        parentPort.postMessage(server.eventThread + ' ' + session.client.eventThread);
      })();
    \`, { eval: true, execArgv: [] });
    w.on('message', async (m) => console.log(m, await w.terminate()));`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout, 'js js 1\n', run.stderr);
});

test('on the JS thread, events held back by eventBatchMs reach JS when their hold ends, even if it ended before the timer was set', T, async (t) => {
  // The server's JS thread pauses after every turn that held events back, for longer than the
  // hold (as a thread preempted there does), before it sets its timer (a test hook, in a child
  // process): the held events must go to JS then, not wait for the next datagram or deadline.
  const server = reap(t, spawn(process.execPath, ['--input-type=module', '-e', `${importPackage}
    const server = await soe.SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread: 'js', eventBatchMs: 500 });
    server.on('session', (s) => s.on('message', (data) => s.sendUnreliable(data)));
    process.stdout.write(server.address().port + '\\n');`], {
    env: { ...process.env, SOE_NODE_TEST_HELD_PAUSE_MS: '600' },
    stdio: ['ignore', 'pipe', 'inherit'],
  }));
  const port = await new Promise((resolve) => server.stdout.once('data', (d) => resolve(Number(String(d).trim()))));
  const client = release(t, new SoeClient({ eventThread: 'pump' }));
  const session = await client.connect(`127.0.0.1:${port}`);
  const echo = () => new Promise((resolve) => {
    const timer = setTimeout(resolve, 5000, 'no echo within 5 s');
    session.once('message', (data) => {
      clearTimeout(timer);
      resolve(String(data));
    });
  });
  // Each reaches the server within half a second of its previous call into JS (the accepted
  // session, then the first echo), so both are held back. Unreliable both ways: no ack or
  // resend is due on the server to bring its next turn.
  for (const text of ['first', 'second']) {
    const back = echo();
    session.sendUnreliable(Buffer.from(text));
    assert.equal(await back, text);
  }
});
