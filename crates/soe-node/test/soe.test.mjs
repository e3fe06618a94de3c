// The addon through its JS API, with Node's own test runner (`npm test`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runSoe, startServe } from '../scripts/soe-tool.mjs';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import soe from '../index.js';

const { SoeServer, SoeClient, REASONS } = soe;
const here = path.dirname(fileURLToPath(import.meta.url));

/** Message `i`: its bytes derive from `i`; every fifth is 20 KB (fragments). */
function message(i) {
  const len = i % 5 === 0 ? 20_000 : 1 + ((i * 131) % 700);
  const buf = Buffer.alloc(len);
  for (let j = 0; j < len; j++) buf[j] = (i * 31 + j * 7) & 0xff;
  return buf;
}

/** An echo server: every message goes back the way it came. */
async function echoServer(options = {}) {
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0, ...options });
  server.on('session', (s) => {
    s.on('message', (data, info) => {
      if (info.unreliable) s.sendUnreliable(data);
      else s.send(data, info.channel);
    });
  });
  return server;
}

function collect(session, count) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${count} messages`)), 30_000);
    session.on('message', (data, info) => {
      got.push({ data, info });
      if (got.length === count) {
        clearTimeout(timer);
        resolve(got);
      }
    });
  });
}

test('a Node server and a Node client echo 200 messages, 20 KB ones in fragments, in order', async () => {
  const server = await echoServer();
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  const echoes = collect(session, 200);
  for (let i = 0; i < 200; i++) session.send(message(i));
  const got = await echoes;
  got.forEach(({ data, info }, i) => {
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
  await session.client.close();
  await server.close();
});

test('unreliable messages arrive flagged as such', async () => {
  const server = await echoServer();
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  const got = collect(session, 2);
  session.sendUnreliable(Buffer.from('\x01unreliable'));
  session.send(Buffer.from('reliable'), 2);
  const kinds = (await got).map(({ data, info }) => [data.toString('latin1'), info.kind, info.unreliable, info.channel]);
  kinds.sort();
  assert.deepEqual(kinds, [
    ['\x01unreliable', 'unreliable', true, 0],
    ['reliable', 'reliable', false, 2],
  ]);
  await session.client.close();
  await server.close();
});

test('RC4 switched on for one session after its login request, as the H1Z1 gateway does', async () => {
  const rc4Key = Buffer.from('gateway key');
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0, rc4Key, rc4AtStart: false });
  server.on('session', (s) => {
    s.once('message', (login) => {
      assert.equal(login.toString(), 'LoginRequest');
      s.setEncryption(true);
      s.send(Buffer.from('LoginReply'));
      s.on('message', (data) => s.send(data));
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key, rc4AtStart: false });
  const reply = new Promise((resolve) => session.once('message', resolve));
  session.send(Buffer.from('LoginRequest'));
  session.setEncryption(true);
  assert.equal((await reply).toString(), 'LoginReply');
  const echoes = collect(session, 20);
  for (let i = 0; i < 20; i++) session.send(message(i));
  (await echoes).forEach(({ data }, i) => assert.deepEqual(data, message(i)));
  await session.client.close();
  await server.close();
});

test('a close reaches the other side with its reason', async () => {
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0 });
  const serverSide = new Promise((resolve) => server.once('session', resolve));
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
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
  session2.send(Buffer.from('hello'));
  const peer2 = await accepted;
  const dropped = new Promise((resolve) => session2.once('disconnect', (r, i) => resolve([r, i])));
  assert.equal(await peer2.close('connectionRefused'), 'connectionRefused');
  const [r2, i2] = await dropped;
  assert.equal(r2, 'connectionRefused');
  assert.equal(i2.byPeer, true);
  await session.client.close();
  await session2.client.close();
  await server.close();
});

test('backpressure: send() returns false when the queue is full, then drain', async () => {
  const server = await echoServer();
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { maxQueuedMessages: 4 });
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
  (await echoes).forEach(({ data }, i) => assert.deepEqual(data, message(i), `echo ${i} in order`));
  await session.client.close();
  await server.close();
});

test('bad arguments throw errors with a code, and never crash the process', async () => {
  const server = await echoServer({ maxMessageSize: 1000 });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { maxMessageSize: 1000 });
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
  assert.equal(code(() => session.send(Buffer.from('x'), 7)), 'ERR_OUT_OF_RANGE');
  assert.equal(code(() => session.send(Buffer.alloc(2000))), 'ERR_SOE_MESSAGE_TOO_LARGE');
  assert.equal(code(() => session.sendUnreliable(Buffer.from([0, 1]))), 'ERR_SOE_MESSAGE_TOO_LARGE');
  assert.equal(code(() => session.setEncryption('yes')), 'ERR_INVALID_ARG_TYPE');
  assert.equal(code(() => session.setEncryption(true)), 'ERR_SOE_NO_KEY');
  assert.equal(code(() => session.close('whatever')), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => new SoeServer({ port: 0, udpLength: 5 })), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => new SoeServer({ port: 0, crcLength: 3 })), 'ERR_INVALID_ARG_VALUE');
  assert.equal(code(() => new SoeServer({ port: 0, idleTimeout: -1 })), 'ERR_OUT_OF_RANGE');
  assert.equal(code(() => new SoeServer('nope')), 'ERR_INVALID_ARG_TYPE');
  await assert.rejects(session.client.connect('not an address'), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(session.client.connect(12), { code: 'ERR_INVALID_ARG_TYPE' });
  await session.close();
  assert.equal(code(() => session.send(Buffer.from('late'))), 'ERR_SOE_SESSION_CLOSED');
  assert.equal(code(() => session.stats()), 'ERR_SOE_SESSION_CLOSED');
  await session.client.close();
  await server.close();
});

test('connecting where nobody serves rejects with ERR_SOE_CONNECT', async () => {
  const client = new SoeClient({ connectTimeout: 500 });
  const nobody = await SoeServer.listen({ host: '127.0.0.1', port: 0 });
  const { port } = nobody.address();
  await nobody.close();
  await assert.rejects(client.connect(`127.0.0.1:${port}`), { code: 'ERR_SOE_CONNECT' });
  await client.close();
});

// The Rust `soe` tool from this workspace (built by `cargo xtask node`), if present.
const soeBin = process.env.SOE_BIN || path.join(here, '..', '..', '..', 'target', 'debug', 'soe');
const haveSoe = existsSync(soeBin);

const run = (args) => runSoe(soeBin, args);

test('the addon against the Rust `soe serve`, and `soe ping` against a Node server', { skip: !haveSoe && `no soe binary at ${soeBin} (cargo build -p soe-cli)` }, async () => {
  // Node client -> Rust server.
  const { child: serve, port } = await startServe(soeBin, ['--duration', '60']);
  const session = await SoeClient.connect(`127.0.0.1:${port}`);
  const echoes = collect(session, 50);
  for (let i = 0; i < 50; i++) session.send(message(i));
  (await echoes).forEach(({ data }, i) => assert.deepEqual(data, message(i)));
  await session.close();
  await session.client.close();
  serve.kill();
  // Rust client -> Node server.
  const server = await echoServer();
  const { status, out } = await run(['ping', '--count', '10', '--size', '20000', '--interval', '10', `127.0.0.1:${server.address().port}`]);
  assert.equal(status, 0, out);
  assert.match(out, /10 sent, 10 received, 0 mismatched/);
  await server.close();
});

test('index.d.ts declares exactly what index.js exports', async () => {
  const { readFileSync } = await import('node:fs');
  const dts = readFileSync(path.join(here, '..', 'index.d.ts'), 'utf8');
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
      const declared = block.includes(`${m}(`) || dts.includes(`class Endpoint`) && dts.slice(dts.indexOf('class Endpoint')).includes(`${m}(`);
      assert.ok(declared, `${cls}.${m} is declared in index.d.ts`);
    }
  }
});

test('a JS handler that blocks for 2 s stalls neither acks nor resends', { skip: !haveSoe && `no soe binary at ${soeBin}` }, async () => {
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0 });
  let blocked = false;
  server.on('session', (s) => {
    s.on('message', (data) => {
      if (!blocked) {
        blocked = true;
        const until = Date.now() + 2000;
        while (Date.now() < until) {
          // The JS thread is busy; the endpoint's threads go on acknowledging.
        }
      }
      s.send(data);
    });
  });
  const { status, out } = await run([
    'ping', '--count', '20', '--size', '300', '--interval', '50', '--timeout', '10',
    `127.0.0.1:${server.address().port}`,
  ]);
  assert.equal(status, 0, out);
  assert.match(out, /20 sent, 20 received, 0 mismatched/);
  // Every packet was acknowledged while JS was blocked: a stalled ack path would have made
  // the client resend over the 2 s (several probe and retransmission timeouts); a loaded
  // machine may cause one or two spurious resends, never that many.
  const resends = Number(/(\d+) resend\(s\)/.exec(out)[1]);
  assert.ok(resends < 3, `${resends} resends:\n${out}`);
  await server.close();
});

test('a reader that stays behind past receiveQueueBytes closes the session with reliableOverflow', { skip: !haveSoe && `no soe binary at ${soeBin}` }, async () => {
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0, receiveQueueBytes: 8192 });
  const ended = new Promise((resolve) => {
    server.on('session', (s) => {
      s.on('disconnect', (reason, info) => resolve([reason, info]));
      s.once('message', () => {
        // A handler that never yields for a while: everything else waits in the queue.
        const until = Date.now() + 3000;
        while (Date.now() < until) {
          // busy
        }
      });
    });
  });
  const load = run(['load', '--sessions', '1', '--messages', '100', '--size', '1000', '--depth', '64', '--timeout', '5', `127.0.0.1:${server.address().port}`]);
  const [reason, info] = await ended;
  assert.equal(reason, 'reliableOverflow', JSON.stringify(info));
  assert.equal(info.byPeer, false);
  const { status } = await load;
  assert.notEqual(status, 0, 'the client was told its session ended');
  await server.close();
});
