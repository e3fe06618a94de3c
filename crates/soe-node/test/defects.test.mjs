// The defects a new user found (issue 28, section 3), and the Node idioms asked beside them:
// each test failed on the code before its fix.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { T, release, echoServer, collect, runNode, importPackage, pkgDir } from './helpers.mjs';
import soe from '../index.js';

const { SoeServer, SoeClient, SoeSession, REASONS } = soe;

/** A loopback UDP port with nothing behind it. */
async function closedPort() {
  const socket = dgram.createSocket('udp4');
  await new Promise((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise((resolve) => socket.close(resolve));
  return port;
}

/** The error `fn` throws (or the rejection of the promise it returns). */
async function failure(fn) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  assert.fail('no error');
}

test('(1) a failed SoeClient.connect leaves nothing open: the process exits', T, async (t) => {
  // No server at all.
  const port = await closedPort();
  const nobody = await runNode(t, `${importPackage}
    await soe.SoeClient.connect('127.0.0.1:${port}', { connectTimeout: 300 }).catch((e) => console.log(e.code));`);
  assert.equal(nobody.killed, false, 'the process was still running 15 s later');
  assert.equal(nobody.stdout.trim(), 'ERR_SOE_CONNECT', nobody.stderr);
  assert.equal(nobody.status, 0, nobody.stderr);
  // A server that refuses the protocol.
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, protocol: 'One' }));
  const refused = await runNode(t, `${importPackage}
    await soe.SoeClient.connect('127.0.0.1:${server.address().port}', { protocol: 'Other', connectTimeout: 60000 })
      .catch((e) => console.log(e.code, /protocolMismatch|ProtocolMismatch/.test(e.message)));`);
  assert.equal(refused.killed, false, 'the process was still running 15 s later');
  assert.equal(refused.stdout.trim(), 'ERR_SOE_CONNECT true', refused.stderr);
});

test('(2) wrong option types and values are Node-style errors naming the option', T, async (t) => {
  const cases = [
    [{ compression: 'yes' }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.compression'],
    [{ protocol: 42 }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.protocol'],
    [{ host: 123 }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.host'],
    [{ rc4AtStart: 1 }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.rc4AtStart'],
    [{ rc4Key: 7 }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.rc4Key'],
    [{ udpLength: '512' }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.udpLength'],
    [{ udpLength: 5 }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.udpLength'],
    [{ crcLength: 3 }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.crcLength'],
    [{ idleTimeout: -1 }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.idleTimeout'],
    [{ maxSessions: 1.5 }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.maxSessions'],
    [{ port: 70000 }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.port'],
    [{ port: 'x' }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.port'],
    [{ rc4Key: Buffer.alloc(0) }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.rc4Key'],
    [{ protocol: 'a\0b' }, RangeError, 'ERR_INVALID_ARG_VALUE', 'options.protocol'],
  ];
  for (const [options, type, code, name] of cases) {
    const e = await failure(() => new SoeServer({ host: '127.0.0.1', ...options }));
    assert.ok(e instanceof type, `${JSON.stringify(options)}: ${e.name}: ${e.message}`);
    assert.equal(e.code, code, `${JSON.stringify(options)}: ${e.message}`);
    assert.ok(e.message.includes(name), `${JSON.stringify(options)}: "${e.message}" names ${name}`);
  }
  for (const [options, type, code, name] of [
    [{ bind: 5 }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.bind'],
    [{ compression: 'yes' }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.compression'],
    [{ connectTimeout: 'soon' }, TypeError, 'ERR_INVALID_ARG_TYPE', 'options.connectTimeout'],
  ]) {
    const e = await failure(() => SoeClient.connect('127.0.0.1:1', options));
    assert.ok(e instanceof type, `${JSON.stringify(options)}: ${e.name}: ${e.message}`);
    assert.equal(e.code, code);
    assert.ok(e.message.includes(name), `"${e.message}" names ${name}`);
  }
  const client = release(t, new SoeClient());
  const bad = await failure(() => client.connect({ host: 5, port: 1 }));
  assert.ok(bad instanceof TypeError && bad.code === 'ERR_INVALID_ARG_TYPE' && bad.message.includes('target.host'), bad.message);
  const port = await failure(() => client.connect({ host: '127.0.0.1', port: -1 }));
  assert.ok(port instanceof RangeError && port.code === 'ERR_INVALID_ARG_VALUE' && port.message.includes('target.port'), port.message);
  // The message never shows napi's internals.
  for (const e of [bad, port]) assert.doesNotMatch(e.message, /Expected|napi|includes is not/);
});

test('(3) an unreliable message that is empty or starts with byte 0 is refused for what it is', T, async (t) => {
  const server = await echoServer(t);
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  for (const [data, words] of [
    [Buffer.alloc(0), /empty/],
    [Buffer.from([0, 1, 2]), /byte 0|first byte/],
  ]) {
    const e = await failure(() => session.sendUnreliable(data));
    assert.ok(e instanceof RangeError, e.message);
    assert.equal(e.code, 'ERR_INVALID_ARG_VALUE', e.message);
    assert.match(e.message, words);
  }
  // What is too large is still too large, and a good one still goes out.
  const big = await failure(() => session.sendUnreliable(Buffer.alloc(4000, 1)));
  assert.equal(big.code, 'ERR_SOE_MESSAGE_TOO_LARGE');
  const echoed = collect(session, 1);
  session.sendUnreliable(Buffer.from([1, 0, 0]));
  assert.deepEqual((await echoed)[0][0], Buffer.from([1, 0, 0]));
});

test('(4) host names resolve: "localhost:PORT", { host: "localhost" } and a server on localhost', T, async (t) => {
  const server = await echoServer(t);
  const port = server.address().port;
  for (const target of [`localhost:${port}`, { host: 'localhost', port }]) {
    const session = await SoeClient.connect(target);
    release(t, session.client);
    const echoed = collect(session, 1);
    session.send(Buffer.from('by name'));
    assert.equal((await echoed)[0][0].toString(), 'by name');
    await session.close();
  }
  const named = release(t, await SoeServer.listen({ host: 'localhost', port: 0 }));
  assert.equal(named.address().address, '127.0.0.1');
  const direct = release(t, new SoeServer({ host: 'localhost', port: 0 }));
  assert.equal(direct.address().address, '127.0.0.1');
  // dns.lookup's own error (ENOTFOUND, or EAI_AGAIN where no resolver answers).
  const unknown = await failure(() => SoeClient.connect('no-such-host.invalid:1'));
  assert.equal(unknown.syscall, 'getaddrinfo', unknown.message);
  assert.equal(unknown.hostname, 'no-such-host.invalid');
});

test('(5) one rule for close reasons: a name or a known number, anything else rejected', T, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  const accepted = new Promise((resolve) => server.once('session', resolve));
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  session.send(Buffer.from('hi'));
  const peer = await accepted;
  for (const bad of ['bogus', 999, -1, 2.5, null, {}]) {
    for (const [what, close] of [
      ['session.close', () => session.close(bad)],
      ['server.close', () => server.close(bad)],
      ['client.close', () => session.client.close(bad)],
    ]) {
      const e = await failure(close);
      assert.equal(e.code, bad === null || typeof bad === 'object' ? 'ERR_INVALID_ARG_TYPE' : 'ERR_INVALID_ARG_VALUE', `${what}(${String(bad)}): ${e.message}`);
      assert.ok(e instanceof TypeError || e instanceof RangeError, `${what}(${String(bad)})`);
    }
  }
  assert.equal(session.closed, false, 'a refused close closes nothing');
  assert.equal(server.stats().sessions, 1);
  // A known number is its name.
  const seen = new Promise((resolve) => peer.once('disconnect', (reason, info) => resolve([reason, info.code])));
  assert.equal(await session.close(REASONS.reliableOverflow), 'reliableOverflow');
  assert.deepEqual(await seen, ['reliableOverflow', 13]);
});

test('(9) SoeSession is not constructible, and message infos are frozen', T, async (t) => {
  const e = await failure(() => new SoeSession());
  assert.ok(e instanceof TypeError, e.message);
  assert.equal(e.code, 'ERR_ILLEGAL_CONSTRUCTOR');
  const server = await echoServer(t);
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  const got = collect(session, 1);
  session.send(Buffer.from('x'));
  const [[, info]] = await got;
  assert.ok(Object.isFrozen(info));
});

test('(10) an IPv6 target from an IPv4 client fails at once, saying the address family does not match', T, async (t) => {
  const client = release(t, new SoeClient({ connectTimeout: 60_000 }));
  // Were it to wait for the connect timeout (60 s), the test's deadline (30 s) would fail it.
  const e = await failure(() => client.connect('[::1]:20042'));
  assert.equal(e.code, 'ERR_SOE_ADDRESS_FAMILY', e.message);
  assert.match(e.message, /IPv6/);
  assert.match(e.message, /IPv4/);
  assert.match(e.message, /bind/);
  const session = await failure(() => SoeClient.connect({ host: '::1', port: 20042 }, { connectTimeout: 60_000 }));
  assert.equal(session.code, 'ERR_SOE_ADDRESS_FAMILY');
});

test('a client made by SoeClient.connect closes with its last session: the process exits', T, async (t) => {
  const server = await echoServer(t);
  const run = await runNode(t, `${importPackage}
    const session = await soe.SoeClient.connect('127.0.0.1:${server.address().port}');
    const echo = new Promise((resolve) => session.once('message', resolve));
    session.send(Buffer.from('once'));
    console.log(String(await echo));
    console.log(await session.close());`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.stdout, 'once\napplication\n', run.stderr);
  // And when the server ends the session.
  server.on('session', (s) => s.on('message', () => s.close('application')));
  const dropped = await runNode(t, `${importPackage}
    const session = await soe.SoeClient.connect('127.0.0.1:${server.address().port}');
    session.on('disconnect', (reason, info) => console.log(reason, info.byPeer));
    session.send(Buffer.from('bye'));`);
  assert.equal(dropped.killed, false, 'the process was still running 15 s later');
  assert.equal(dropped.stdout, 'application true\n', dropped.stderr);
});

test('client.unref() lets the process exit with a session open; ref() keeps it alive again', T, async (t) => {
  const server = await echoServer(t);
  const run = await runNode(t, `${importPackage}
    const client = new soe.SoeClient();
    const session = await client.connect('127.0.0.1:${server.address().port}');
    const echo = new Promise((resolve) => session.once('message', resolve));
    session.send(Buffer.from('ping'));
    console.log(String(await echo));
    client.unref();
    process.on('exit', () => console.log('exit', session.closed));`);
  assert.equal(run.killed, false, 'the process was still running 15 s later');
  assert.equal(run.stdout, 'ping\nexit false\n', run.stderr);
  const kept = await runNode(t, `${importPackage}
    const client = new soe.SoeClient();
    const session = await client.connect('127.0.0.1:${server.address().port}');
    client.unref();
    client.ref();
    setTimeout(() => { console.log('still here'); client.close(); }, 300);`);
  assert.equal(kept.stdout, 'still here\n', kept.stderr);
  assert.equal(kept.killed, false);
});

test("a failure of the send deferred to the end of the tick is an 'error' event", T, async (t) => {
  const server = await echoServer(t);
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  const client = release(t, session.client);
  const failing = client._native.sendBatch;
  client._native.sendBatch = () => {
    throw new Error('ERR_SOE_INTERNAL: planted');
  };
  const error = new Promise((resolve) => client.once('error', resolve));
  session.send(Buffer.from('lost'));
  const e = await error;
  client._native.sendBatch = failing;
  assert.equal(e.code, 'ERR_SOE_INTERNAL');
  assert.equal(e.message, 'planted');
});

test('a listener that throws does not lose the rest of its batch', T, async (t) => {
  const server = await echoServer(t);
  // In a process of its own: the test runner counts any uncaught exception as a failure.
  const run = await runNode(t, `${importPackage}
    const thrown = [];
    process.on('uncaughtException', (e) => thrown.push(e.message));
    const session = await soe.SoeClient.connect('127.0.0.1:${server.address().port}');
    const got = [];
    session.on('message', (data) => {
      got.push(data.readUInt32LE(0));
      if (got.length === 200) {
        console.log(JSON.stringify({ inOrder: got.every((v, i) => v === i), thrown }));
        session.close();
      }
      if (got.length % 50 === 0) throw new Error('listener failed at ' + got.length);
    });
    for (let i = 0; i < 200; i++) {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(i);
      session.send(b);
    }`);
  assert.equal(run.killed, false, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), {
    inOrder: true,
    thrown: ['listener failed at 50', 'listener failed at 100', 'listener failed at 150'],
  });
});

test('the package declares the types it needs (@types/node) and exports its entry points', T, async () => {
  const { readFileSync } = await import('node:fs');
  const pkg = JSON.parse(readFileSync(`${pkgDir}/package.json`, 'utf8'));
  assert.ok(pkg.peerDependencies?.['@types/node'], 'peerDependencies names @types/node');
  assert.equal(pkg.peerDependenciesMeta?.['@types/node']?.optional, true, 'and only TypeScript users need it');
  assert.ok(pkg.exports['.'] && pkg.exports['./h1z1'], 'exports . and ./h1z1');
});
