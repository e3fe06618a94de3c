// The addon through its JS API, with Node's own test runner (`npm test`). Every test has a
// deadline and releases what it opened when it ends, passed or failed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runSoe, startServe } from '../scripts/soe-tool.mjs';
import { T, release, reap, echoServer, message, collect, soeBin, needsSoe, pkgDir, rc4Keystream, xor, jsThreadRelay } from './helpers.mjs';
import soe from '../index.js';

const { SoeServer, SoeClient, REASONS } = soe;
const run = (args) => runSoe(soeBin, args);

test('a Node server and a Node client echo 200 messages, 20 KB ones in fragments, in order', T, async (t) => {
  const server = await echoServer(t);
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  const echoes = collect(session, 200);
  for (let i = 0; i < 200; i++) session.send(message(i));
  const got = await echoes;
  got.forEach(([data, info], i) => {
    assert.deepEqual(data, message(i), `echo ${i}`);
    assert.equal(info.kind, 'reliable');
    assert.equal(info.unreliable, false);
  });
  const stats = session.stats();
  assert.equal(stats.messagesSent, 200);
  assert.ok(stats.rtt > 0);
  const figures = server.stats();
  assert.equal(figures.sessions, 1);
  assert.ok(figures.datagramsReceived > 200 && figures.datagramsSent > 200, JSON.stringify(figures));
  session.send(message(1));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.ok(server.stats().receivedPerSecond > 0, 'rates since the previous call');
  assert.equal(await session.close(), 'application');
});

test('unreliable and ordered messages arrive flagged as such', T, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  server.on('session', (s) => {
    s.on('message', (data, info) => {
      if (info.kind === 'ordered') s.sendOrdered(data);
      else if (info.unreliable) s.sendUnreliable(data);
      else s.send(data, info.channel);
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  const got = collect(session, 3);
  session.sendUnreliable(Buffer.from('\x01unreliable'));
  session.sendOrdered(Buffer.from('\x00ordered'));
  session.send(Buffer.from('reliable'), 2);
  const kinds = (await got).map(([data, info]) => [data.toString('latin1'), info.kind, info.unreliable, info.channel]);
  kinds.sort();
  assert.deepEqual(kinds, [
    ['\x00ordered', 'ordered', true, 0],
    ['\x01unreliable', 'unreliable', true, 0],
    ['reliable', 'reliable', false, 2],
  ]);
});

test('every unreliable message is sent or counted as dropped, none lost unsaid', T, async (t) => {
  // Unreliable messages go at the end of the tick; one that finds the session's datagram queue
  // full (256 not yet sent) is dropped and counted. 20,000 in one tick: however many the
  // addon's threads manage to send meanwhile, sent + dropped must account for each.
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  const COUNT = 20_000;
  const datagram = Buffer.from([1, 2, 3, 4]);
  for (let i = 0; i < COUNT; i++) session.sendUnreliable(datagram);
  const started = Date.now();
  let s = session.stats();
  while (s.unreliableSent + s.unreliableDropped < COUNT && Date.now() - started < 10_000) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    s = session.stats();
  }
  console.log(`${s.unreliableSent} sent, ${s.unreliableDropped} dropped`);
  assert.equal(s.unreliableSent + s.unreliableDropped, COUNT);
  assert.ok(s.unreliableSent >= 256, `${s.unreliableSent} sent`);
});

test('RC4 switched on for one session after its login request, as the H1Z1 gateway does', T, async (t) => {
  const rc4Key = Buffer.from('gateway key');
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, rc4Key, rc4AtStart: false }));
  server.on('session', (s) => {
    s.once('message', (login) => {
      assert.equal(login.toString(), 'LoginRequest');
      // Switch first, then send the reply that must be encrypted.
      s.setEncryption(true);
      s.send(Buffer.from('LoginReply'));
      s.on('message', (data) => s.send(data));
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key, rc4AtStart: false });
  release(t, session.client);
  const reply = collect(session, 1);
  session.send(Buffer.from('LoginRequest'));
  session.setEncryption(true);
  assert.equal((await reply)[0][0].toString(), 'LoginReply');
  const echoes = collect(session, 20);
  for (let i = 0; i < 20; i++) session.send(message(i));
  (await echoes).forEach(([data], i) => assert.deepEqual(data, message(i)));
});

test('an RC4 switch waits behind messages that wait for room: each goes out as it was sent', T, async (t) => {
  // A queue of 4, and the client's acks relayed by the JS thread, which runs the handler: no
  // ack reaches the server while it sends, so at most the queue and one send window (196
  // packets at most) of the 300 plaintext messages can leave the addon before the switch comes.
  const rc4Key = Buffer.from('gateway key');
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, rc4Key, rc4AtStart: false, maxQueuedMessages: 4 }));
  const plain = Array.from({ length: 300 }, (_, i) => Buffer.from(`plaintext message ${i} `.repeat(20)));
  const secret = Array.from({ length: 300 }, (_, i) => Buffer.from(`encrypted message ${i} `.repeat(20)));
  let waited = 0;
  server.on('session', (s) => {
    s.once('message', () => {
      for (const m of plain) s.send(m);
      waited = s.stats().pendingMessages;
      s.setEncryption(true);
      for (const m of secret) s.send(m);
    });
  });
  // A client without the key reads the wire: plaintext, then the keystream from its start.
  const relay = await jsThreadRelay(t, server.address().port);
  const session = await SoeClient.connect(`127.0.0.1:${relay}`);
  release(t, session.client);
  const got = collect(session, 600);
  session.send(Buffer.from('go'));
  const messages = (await got).map(([data]) => data);
  assert.ok(waited > 0, 'messages waited in the addon when the switch came');
  messages.slice(0, 300).forEach((m, i) => assert.deepEqual(m, plain[i], `message ${i} in the clear`));
  const stream = rc4Keystream(rc4Key, secret.reduce((n, m) => n + m.length, 0));
  let at = 0;
  messages.slice(300).forEach((m, i) => {
    assert.deepEqual(m, xor(secret[i], stream.subarray(at)), `message ${300 + i} encrypted in turn`);
    at += secret[i].length;
  });
});

test('a close reaches the other side with its reason', T, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  const serverSide = new Promise((resolve) => server.once('session', resolve));
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  session.send(Buffer.from('hi'));
  const peer = await serverSide;
  const seen = new Promise((resolve) => peer.once('disconnect', (reason, info) => resolve([reason, info])));
  await session.close('application');
  const [reason, info] = await seen;
  assert.equal(reason, 'application');
  assert.deepEqual(info, { code: REASONS.application, byPeer: true });
  // And the other way, with another reason.
  const accepted = new Promise((resolve) => server.once('session', resolve));
  const session2 = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session2.client);
  session2.send(Buffer.from('hello'));
  const peer2 = await accepted;
  const dropped = new Promise((resolve) => session2.once('disconnect', (r, i) => resolve([r, i])));
  assert.equal(await peer2.close('connectionRefused'), 'connectionRefused');
  const [r2, i2] = await dropped;
  assert.equal(r2, 'connectionRefused');
  assert.equal(i2.byPeer, true);
});

test('backpressure: send() returns false when the queue is full, then drain', T, async (t) => {
  const server = await echoServer(t);
  // Through a relay on the JS thread: no ack comes back while the loop below sends, so the
  // queue of 4 and the first send window (8 packets) fill, whatever the addon's threads do.
  const relay = await jsThreadRelay(t, server.address().port);
  const session = await SoeClient.connect(`127.0.0.1:${relay}`, { maxQueuedMessages: 4 });
  release(t, session.client);
  const echoes = collect(session, 100);
  let refused = 0;
  for (let i = 0; i < 100; i++) {
    if (!session.send(message(i))) refused++;
  }
  assert.ok(refused > 0, 'the queue of 4 filled');
  assert.ok(session.writableNeedDrain);
  assert.ok(session.stats().pendingMessages > 0);
  await new Promise((resolve) => session.once('drain', resolve));
  assert.equal(session.writableNeedDrain, false);
  (await echoes).forEach(([data], i) => assert.deepEqual(data, message(i), `echo ${i} in order`));
});

test('bad arguments throw errors with a code, and never crash the process', T, async (t) => {
  const server = await echoServer(t, { maxMessageSize: 1000 });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { maxMessageSize: 1000 });
  release(t, session.client);
  const code = (fn) => {
    try {
      fn();
    } catch (e) {
      assert.ok(e instanceof Error);
      return e.code;
    }
    return 'no error';
  };
  assert.equal(code(() => session.send(42)), 'ERR_INVALID_ARG_TYPE');
  assert.equal(code(() => session.send(Buffer.from('x'), 7)), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => session.send(Buffer.from('x'), '1')), 'ERR_INVALID_ARG_TYPE');
  assert.equal(code(() => session.send(Buffer.alloc(2000))), 'ERR_SOE_MESSAGE_TOO_LARGE');
  assert.equal(code(() => session.sendUnreliable(Buffer.from([0, 1]))), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => session.setEncryption('yes')), 'ERR_INVALID_ARG_TYPE');
  assert.equal(code(() => session.setEncryption(true)), 'ERR_SOE_NO_KEY');
  await assert.rejects(session.close('whatever'), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.equal(code(() => new SoeServer({ port: 0, udpLength: 5 })), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => new SoeServer({ port: 0, crcLength: 3 })), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => new SoeServer({ port: 0, idleTimeout: -1 })), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => new SoeServer('nope')), 'ERR_INVALID_ARG_TYPE');
  await assert.rejects(session.client.connect('not an address'), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(session.client.connect(12), { code: 'ERR_INVALID_ARG_TYPE' });
  await session.close();
  assert.equal(code(() => session.send(Buffer.from('late'))), 'ERR_SOE_SESSION_CLOSED');
  assert.equal(code(() => session.stats()), 'ERR_SOE_SESSION_CLOSED');
});

test('a preset sets what it names (h1z1: its gateway protocol name); preset and maxOutstandingBytes are checked', T, async (t) => {
  const server = await echoServer(t, { preset: 'h1z1', maxOutstandingBytes: 4096 });
  const url = `127.0.0.1:${server.address().port}`;
  const protocols = [];
  server.on('session', (s) => protocols.push(s.protocol));
  // A cap below one packet still lets each packet go out alone: nothing is lost.
  const session = await SoeClient.connect(url, { preset: 'h1z1', maxOutstandingBytes: 1 });
  release(t, session.client);
  const echoes = collect(session, 10);
  for (let i = 0; i < 10; i++) session.send(message(i));
  (await echoes).forEach(([data], i) => assert.deepEqual(data, message(i), `echo ${i}`));
  assert.deepEqual(protocols, ['ExternalGatewayApi_3'], 'the preset named the protocol on both sides');
  // A client without the preset asks for SoeEcho, which the h1z1 server refuses.
  const plain = release(t, new SoeClient({ connectTimeout: 2000 }));
  await assert.rejects(plain.connect(url), { code: 'ERR_SOE_CONNECT' });
  assert.deepEqual(protocols, ['ExternalGatewayApi_3']);
  const code = (options) => {
    try {
      new SoeServer({ port: 0, ...options });
    } catch (e) {
      return e.code;
    }
    return 'no error';
  };
  assert.equal(code({ preset: 'eq2' }), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code({ preset: 2 }), 'ERR_INVALID_ARG_TYPE');
  assert.equal(code({ maxOutstandingBytes: 0 }), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code({ maxOutstandingBytes: '64k' }), 'ERR_INVALID_ARG_TYPE');
});

test('connecting where nobody serves rejects with ERR_SOE_CONNECT', T, async (t) => {
  const client = release(t, new SoeClient({ connectTimeout: 500 }));
  const nobody = await SoeServer.listen({ host: '127.0.0.1', port: 0 });
  const { port } = nobody.address();
  await nobody.close();
  await assert.rejects(client.connect(`127.0.0.1:${port}`), { code: 'ERR_SOE_CONNECT' });
});

test('the addon against the Rust `soe serve`, and `soe ping` against a Node server', { ...T, skip: needsSoe }, async (t) => {
  // Node client -> Rust server.
  const { child: serve, port } = await startServe(soeBin, ['--duration', '60']);
  reap(t, serve);
  const session = await SoeClient.connect(`127.0.0.1:${port}`);
  release(t, session.client);
  const echoes = collect(session, 50);
  for (let i = 0; i < 50; i++) session.send(message(i));
  (await echoes).forEach(([data], i) => assert.deepEqual(data, message(i)));
  await session.close();
  // Rust client -> Node server.
  const server = await echoServer(t);
  const { status, out } = await run(['ping', '--count', '10', '--size', '20000', '--interval', '10', `127.0.0.1:${server.address().port}`]);
  assert.equal(status, 0, out);
  assert.match(out, /10 sent, 10 received, 0 mismatched/);
});

test('index.d.ts declares exactly what index.js exports', T, async () => {
  const dts = readFileSync(path.join(pkgDir, 'index.d.ts'), 'utf8');
  for (const name of Object.keys(soe)) {
    assert.match(dts, new RegExp(`export (declare )?(class|const) ${name}\\b`), `${name} is declared`);
  }
  for (const [cls, proto] of [['SoeSession', soe.SoeSession.prototype], ['SoeServer', soe.SoeServer.prototype], ['SoeClient', soe.SoeClient.prototype]]) {
    const body = dts.slice(dts.indexOf(`class ${cls}`));
    const block = body.slice(0, body.indexOf('\n}'));
    const methods = new Set();
    for (let p = proto; p && p !== Object.prototype && p.constructor.name !== 'EventEmitter'; p = Object.getPrototypeOf(p)) {
      for (const m of Object.getOwnPropertyNames(p)) if (m !== 'constructor' && !m.startsWith('_')) methods.add(m);
    }
    for (const m of methods) {
      // A method, or a getter as a readonly property.
      const has = (text) => text.includes(`${m}(`) || text.includes(`readonly ${m}:`);
      const declared = has(block) || (dts.includes('class Endpoint') && has(dts.slice(dts.indexOf('class Endpoint'))));
      assert.ok(declared, `${cls}.${m} is declared in index.d.ts`);
    }
  }
});

for (const eventThread of ['js', 'pump']) {
  test(`a JS handler that blocks for 2 s stalls neither acks nor resends (eventThread ${eventThread})`, { ...T, skip: needsSoe }, async (t) => {
    // What the Rust side did while JS was blocked, read from the blocked handler itself: the
    // datagrams that arrived in those 2 s (the load keeps 8 messages outstanding, 40 a second,
    // so some arrive then), and the acks that answered them. A stalled ack path would have
    // answered none, and the client's probe timeouts would have resent into the silence.
    const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, eventThread }));
    assert.equal(server.eventThread, eventThread);
    let during = null;
    server.on('session', (s) => {
      s.on('message', (data) => {
        if (during === null) {
          const before = s.stats();
          const until = Date.now() + 2000;
          while (Date.now() < until) {
            // The JS thread is busy; the endpoint's threads go on acknowledging.
          }
          const after = s.stats();
          during = {
            datagramsReceived: after.datagramsReceived - before.datagramsReceived,
            duplicates: after.duplicates - before.duplicates,
            acksSent: after.acksSent - before.acksSent,
          };
        }
        s.send(data);
      });
    });
    const { status, out } = await run([
      'load', '--sessions', '1', '--messages', '60', '--size', '300', '--depth', '8', '--rate', '40',
      '--timeout', '10', '--json', `127.0.0.1:${server.address().port}`,
    ]);
    assert.equal(status, 0, out);
    const summary = JSON.parse(out.slice(out.indexOf('{')));
    assert.equal(summary.messages_verified, 60, out);
    assert.ok(during.datagramsReceived > 0, `data arrived while JS was blocked: ${JSON.stringify(during)}`);
    assert.ok(during.acksSent > 0, `and was acknowledged then: ${JSON.stringify(during)}`);
  });

  test(`a reader that stays behind past receiveQueueBytes closes the session with reliableOverflow (eventThread ${eventThread})`, { ...T, timeout: 60_000, skip: needsSoe }, async (t) => {
    // The handler stays behind until the session has ended (the endpoint holds no session any
    // more), so the overflow is decided by what the test controls, not by a race between the
    // server's block and the client's echo timeout (30 s here, far beyond the wait).
    const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, receiveQueueBytes: 8192, eventThread }));
    let stayedBehind = null;
    const ended = new Promise((resolve) => {
      server.on('session', (s) => {
        s.on('disconnect', (reason, info) => resolve([reason, info]));
        s.once('message', () => {
          const until = Date.now() + 20_000;
          while (server.stats().sessions > 0 && Date.now() < until) {
            // Not reading: everything else waits in the session's receive queue.
          }
          stayedBehind = server.stats().sessions === 0;
        });
      });
    });
    // 200 messages of 1000 B outstanding: more than the addon's pump holds for JS (64 batches)
    // plus 8 KiB, however the pump batches them.
    const load = run(['load', '--sessions', '1', '--messages', '400', '--size', '1000', '--depth', '200', '--timeout', '30', `127.0.0.1:${server.address().port}`]);
    const [reason, info] = await ended;
    assert.equal(stayedBehind, true, 'the session ended while the reader stayed behind');
    assert.equal(reason, 'reliableOverflow', JSON.stringify(info));
    assert.equal(info.byPeer, false);
    const { status } = await load;
    assert.notEqual(status, 0, 'the client was told its session ended');
  });
}
