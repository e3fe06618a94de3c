// The guard of eventThread 'js': while the JS thread is held, a thread of the addon drives the
// endpoint (acks, resends, receiving into the bounded queue), and it never keeps a process or a
// worker from ending.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import soe from '../index.js';
import { T, release, echoServer, runNode, importPackage, pkgDir } from './helpers.mjs';

const { SoeServer } = soe;


test("on the JS thread, datagrams that arrive while a handler holds it are received and acknowledged", T, async (t) => {
  // The client runs in another process (on its pump), so it goes on sending while this
  // process's JS thread is held; what the server did then is read from the held handler.
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread: 'js' }));
  assert.equal(server.eventThread, 'js');
  let during = null;
  server.on('session', (s) => {
    s.on('message', (data) => {
      if (during === null) {
        const before = s.stats();
        // Held until the guard has received and acknowledged the client's next datagrams (at
        // most 10 s, after which the assertions below fail): certain however late the client's
        // process runs, where a fixed hold could end before its next message came.
        const until = Date.now() + 10000;
        let after;
        do {
          after = s.stats();
        } while (
          (after.datagramsReceived === before.datagramsReceived || after.acksSent === before.acksSent) &&
          Date.now() < until
        );
        during = {
          datagramsReceived: after.datagramsReceived - before.datagramsReceived,
          acksSent: after.acksSent - before.acksSent,
        };
      }
      s.send(data);
    });
  });
  const run = await runNode(t, `${importPackage}
    const client = new soe.SoeClient({ eventThread: 'pump' });
    const session = await client.connect('127.0.0.1:${server.address().port}');
    let echoed = 0;
    session.on('message', () => {
      if (++echoed === 40) { console.log('echoed', echoed); client.close(); }
    });
    // 40 messages over a second: most of them while the server's handler holds its thread.
    let sent = 0;
    const timer = setInterval(() => {
      session.send(Buffer.alloc(300, sent));
      if (++sent === 40) clearInterval(timer);
    }, 25);`);
  assert.equal(run.killed, false, 'the client was still running 15 s later');
  assert.equal(run.stdout, 'echoed 40\n', run.stderr);
  assert.ok(during.datagramsReceived > 0, `data arrived while JS was held: ${JSON.stringify(during)}`);
  assert.ok(during.acksSent > 0, `and was acknowledged then: ${JSON.stringify(during)}`);
});

test('an unref()ed endpoint lets the process exit while its guard drives it', T, async (t) => {
  const server = await echoServer(t, { eventThread: 'pump' });
  const run = await runNode(t, `${importPackage}
    const client = new soe.SoeClient({ eventThread: 'js' });
    const session = await client.connect('127.0.0.1:${server.address().port}');
    for (let i = 0; i < 200; i++) session.send(Buffer.alloc(500, i));
    client.unref();
    process.on('exit', () => console.log('exit'));
    // Echoes come back while this thread is held: the guard takes the loop over, and still
    // holds it, or has just let it go, when the script ends.
    setImmediate(() => {
      const until = Date.now() + 300;
      while (Date.now() < until) {}
      console.log(client.eventThread);
    });`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout, 'js\nexit\n', run.stderr);
});

test('a worker held in JS, its endpoints driven by their guards, is terminated cleanly', T, async (t) => {
  // The environment's cleanup hook stops and joins each guard before it closes the handles
  // the guard wakes.
  const run = await runNode(t, `
    import { Worker } from 'node:worker_threads';
    const index = ${JSON.stringify(path.join(pkgDir, 'index.js'))};
    const w = new Worker(\`
      const soe = require(\${JSON.stringify(index)});
      const { parentPort } = require('node:worker_threads');
      (async () => {
        const server = await soe.SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread: 'js' });
        server.on('session', (s) => s.on('message', (m) => s.send(m)));
        const session = await soe.SoeClient.connect('127.0.0.1:' + server.address().port, { eventThread: 'js' });
        for (let i = 0; i < 300; i++) session.send(Buffer.alloc(1000, i));
        setTimeout(() => {
          parentPort.postMessage('held');
          for (;;) {}
        }, 20);
      })();
    \`, { eval: true, execArgv: [] });
    w.on('message', (m) => setTimeout(async () => console.log(m, await w.terminate()), 200));`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout, 'held 1\n', run.stderr);
});
