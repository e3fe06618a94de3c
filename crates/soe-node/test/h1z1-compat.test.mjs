// soe-node/h1z1 against what h1z1-server's operators and tools rely on (issue 36): each row of
// the README's table that says "matches" has a test here or in h1z1.test.mjs that fails if it
// stops matching. Some tests speak raw SOE through a dgram socket, as h1z1-server's own
// benchmark clients do (SessionRequest version 0, a 2-byte Disconnect).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import zlib from 'node:zlib';
import { SOEServer } from 'soe-node/h1z1';
import { SoeClient } from 'soe-node';
import { T, release } from './helpers.mjs';

const cryptoKey = Buffer.from('F70IaxuU8C/w7FPXY1ibXw==', 'base64');

/** Starts `server` on a free loopback port (or `port`), stopped when the test ends. */
function started(t, server) {
  server._serverAddress = '127.0.0.1';
  server.start();
  release(t, server);
  return server;
}

function once(emitter, event) {
  return new Promise((resolve) => emitter.once(event, (...args) => resolve(args)));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The lag in ms that getNetworkStats() reports: "Avg Server lag : Xms". */
function reportedLag(server) {
  const [line] = server.getNetworkStats();
  const m = /^Avg Server lag : ([\d.]+)ms$/.exec(line);
  assert.ok(m, line);
  return Number(m[1]);
}

/** A stand-in for the server's `monitorEventLoopDelay` histogram: fixed readings, in ns. */
function fakeHistogram(count, meanMs, maxMs) {
  return {
    count,
    mean: meanMs * 1e6,
    max: maxMs * 1e6,
    resets: 0,
    reset() {
      this.resets += 1;
    },
    disable() {},
  };
}

test('getNetworkStats(): the lag is what the loop\'s delay exceeds its 20 ms sampling interval by', T, async (t) => {
  // The readings are injected, so that what an idle loop reports does not depend on how busy
  // the machine running the test is (the test below drives the real monitor).
  const server = started(t, new SOEServer(0, cryptoKey));
  // An idle loop: every sample is the sampling interval itself, give or take.
  server._lag = fakeHistogram(50, 20, 20.4);
  assert.deepEqual(server.getNetworkStats(), ['Avg Server lag : 0ms']);
  assert.equal(server.avgEventLoopLag, 0);
  assert.ok(Math.abs(server.currentEventLoopLag - 0.4) < 1e-9, `${server.currentEventLoopLag}`);
  assert.equal(server._lag.resets, 1, 'each reading starts a new period');
  // A timer that ran a little early never makes the lag negative.
  server._lag = fakeHistogram(50, 19.5, 19.9);
  assert.deepEqual(server.getNetworkStats(), ['Avg Server lag : 0ms']);
  assert.equal(server.currentEventLoopLag, 0);
  // A loop stalled now and then: the mean's excess, rounded to 0.1 ms; the worst sample's.
  server._lag = fakeHistogram(40, 23.46, 80);
  assert.deepEqual(server.getNetworkStats(), ['Avg Server lag : 3.5ms']);
  assert.ok(Math.abs(server.avgEventLoopLag - 3.46) < 1e-9, `${server.avgEventLoopLag}`);
  assert.equal(server.currentEventLoopLag, 60);
  // No sample since the last call: the last figures stand, and nothing is reset.
  const empty = fakeHistogram(0, 0, 0);
  server._lag = empty;
  assert.deepEqual(server.getNetworkStats(), ['Avg Server lag : 3.5ms']);
  assert.equal(empty.resets, 0);
});

test('getNetworkStats(): a stalled event loop shows as a lag', T, async (t) => {
  const server = started(t, new SOEServer(0, cryptoKey));
  server.getNetworkStats(); // starts a new period
  // A sample is the time between two runs of the sampling timer, and a new period starts
  // without a previous run: the timer runs at least once (every 20 ms) before this later one.
  await sleep(50);
  // The loop is held for 200 ms: the sampling timer's next run is at least that long after its
  // last, however fast or slow the machine (a slower one only adds to it).
  const until = Date.now() + 200;
  while (Date.now() < until);
  // The overdue sampling timer runs before this later one, so its sample is in.
  await sleep(50);
  const avg = reportedLag(server);
  assert.ok(server.currentEventLoopLag >= 170, `a 200 ms stall: worst lag ${server.currentEventLoopLag} ms`);
  assert.ok(avg > 10, `a 200 ms stall among a few 20 ms samples: mean lag ${avg} ms`);
});

/** A raw SOE client over dgram: SessionRequest, framed packets with the server's CRC. */
class RawClient {
  constructor(t, port) {
    this.port = port;
    this.socket = dgram.createSocket('udp4');
    this.received = [];
    this.waiters = [];
    this.socket.on('message', (d) => {
      this.received.push(d);
      for (const w of this.waiters.splice(0)) w();
    });
    t.after(() => this.socket.close());
  }

  send(bytes) {
    this.socket.send(bytes, this.port, '127.0.0.1');
  }

  /** The next datagram that `match` accepts (waits up to 3 s). */
  async next(match) {
    const end = Date.now() + 3000;
    for (;;) {
      const i = this.received.findIndex(match);
      if (i >= 0) return this.received.splice(i, 1)[0];
      if (Date.now() > end) throw new Error('no such datagram');
      await new Promise((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  /** SessionRequest with `version` in the field h1emu-core calls crc_length. */
  async connect(version, sessionId = 0x1234) {
    const name = Buffer.from('Echo\0');
    const req = Buffer.alloc(14);
    req.writeUInt16BE(0x0001, 0);
    req.writeUInt32BE(version, 2);
    req.writeUInt32BE(sessionId, 6);
    req.writeUInt32BE(512, 10);
    this.send(Buffer.concat([req, name]));
    const reply = await this.next((d) => d.readUInt16BE(0) === 0x0002);
    this.crcSeed = reply.readUInt32BE(6);
    this.crcLength = reply[10];
    return reply;
  }

  /** `packet` (opcode and body) with the session's CRC trailer. */
  framed(packet) {
    const crc = zlib.crc32(packet, zlib.crc32(Buffer.from([
      this.crcSeed & 0xff, (this.crcSeed >>> 8) & 0xff, (this.crcSeed >>> 16) & 0xff, this.crcSeed >>> 24,
    ])));
    const trailer = Buffer.alloc(4);
    trailer.writeUInt32BE(crc >>> 0);
    return Buffer.concat([packet, trailer.subarray(4 - this.crcLength)]);
  }
}

test('a SessionRequest of protocol version 0 (h1z1-server\'s echo client) is served; a 2-byte Disconnect ends it', T, async (t) => {
  const server = new SOEServer(0, cryptoKey);
  server._useEncryption = false;
  started(t, server);
  const raw = new RawClient(t, server.address().port);
  const reply = await raw.connect(0);
  assert.equal(reply.readUInt32BE(2), 0x1234, 'the session id echoed');
  assert.equal(reply.readUInt32BE(17), 3, 'the server speaks SOE v3');
  const connected = once(server, 'connect');
  const data = once(server, 'appdata');
  raw.send(raw.framed(Buffer.from([0x00, 0x09, 0x00, 0x00, 0x41, 0x42, 0x43])));
  const [client] = await connected;
  const [from, message] = await data;
  assert.equal(from, client);
  assert.deepEqual(message, Buffer.from('ABC'));
  // h1z1-server's client ends with `00 05` and no body (here with the session's CRC).
  const left = once(server, 'disconnect');
  raw.send(raw.framed(Buffer.from([0x00, 0x05])));
  const [gone] = await left;
  assert.equal(gone, client);
  assert.equal(server.getSoeClient(client.soeClientId), undefined);
});

test("'appdata' Buffers keep only their own bytes alive", T, async (t) => {
  const server = started(t, new SOEServer(0, cryptoKey));
  const kept = [];
  const all = new Promise((resolve) => {
    server.on('appdata', (client, data) => {
      kept.push(data);
      if (kept.length === 200) resolve();
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  for (let i = 0; i < 200; i++) session.send(Buffer.alloc(100 + i, i));
  await all;
  kept.forEach((data, i) => {
    assert.deepEqual(data, Buffer.alloc(100 + i, i));
    assert.equal(data.byteOffset, 0, `message ${i} is a view at ${data.byteOffset}`);
    assert.equal(data.buffer.byteLength, data.length, `message ${i} pins ${data.buffer.byteLength} bytes`);
  });
});

/** Reliable packets the server sent to its only client for 20 small messages of one tick. */
async function packetsFor20(t, bundleMessages) {
  const server = new SOEServer(0, cryptoKey);
  if (bundleMessages !== undefined) server.bundleMessages = bundleMessages;
  started(t, server);
  const connected = once(server, 'connect');
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  session.send(Buffer.from('hello'));
  const [client] = await connected;
  let got = 0;
  const all = new Promise((resolve) => session.on('message', () => (++got === 20 ? resolve() : null)));
  for (let i = 0; i < 20; i++) server.sendAppData(client, Buffer.alloc(40, i));
  await all;
  return client._session.stats().reliablePacketsSent;
}

test('Group packing: on by default (20 small messages in a few packets), one per packet with bundleMessages = false', T, async (t) => {
  const grouped = await packetsFor20(t, undefined);
  assert.ok(grouped < 10, `20 messages took ${grouped} packets`);
  const single = await packetsFor20(t, false);
  assert.equal(single, 20, 'one message per reliable packet, as h1z1-server sends them');
});

test('start() on a port in use: ERR_SOE_BIND by default, shared with reusePort = true', T, async (t) => {
  const first = new SOEServer(0, cryptoKey);
  first.reusePort = true;
  started(t, first);
  const port = first.address().port;
  const second = new SOEServer(port, cryptoKey);
  second._serverAddress = '127.0.0.1';
  assert.throws(() => second.start(), { code: 'ERR_SOE_BIND' });
  const shared = new SOEServer(port, cryptoKey);
  shared.reusePort = true;
  started(t, shared);
  assert.equal(shared.address().port, port);
  // A client reaches one of them.
  const session = await SoeClient.connect(`127.0.0.1:${port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  session.send(Buffer.from('x'));
  await Promise.race([once(first, 'appdata'), once(shared, 'appdata')]);
});

test('stop() with clients connected: no crash, and a client sending afterwards reaches nothing', T, async (t) => {
  const server = started(t, new SOEServer(0, cryptoKey));
  const port = server.address().port;
  const connected = once(server, 'connect');
  const session = await SoeClient.connect(`127.0.0.1:${port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  const before = once(server, 'appdata');
  session.send(Buffer.from('before'));
  await connected;
  await before;
  let after = 0;
  server.on('appdata', () => (after += 1));
  const disconnected = once(session, 'disconnect');
  await server.stop();
  const [reason] = await disconnected;
  assert.equal(reason, 'managerDeleted');
  assert.throws(() => session.send(Buffer.from('after')), { code: 'ERR_SOE_SESSION_CLOSED' });
  await sleep(100);
  assert.equal(after, 0);
});

test('rate limits: at most 30 SessionRequests a minute are answered from one source', T, async (t) => {
  const server = new SOEServer(0, cryptoKey);
  server.limitLoopback = true;
  started(t, server);
  const raw = new RawClient(t, server.address().port);
  const name = Buffer.from('Echo\0');
  // The same request again and again, as a client resends it while unanswered: each answer
  // takes a token.
  for (let i = 0; i < 40; i++) {
    const req = Buffer.alloc(14);
    req.writeUInt16BE(0x0001, 0);
    req.writeUInt32BE(3, 2);
    req.writeUInt32BE(1000, 6);
    req.writeUInt32BE(512, 10);
    raw.send(Buffer.concat([req, name]));
  }
  await sleep(500);
  const replies = raw.received.filter((d) => d.readUInt16BE(0) === 0x0002).length;
  assert.ok(replies >= 1 && replies <= 30, `${replies} of 40 answered`);
});

// The limit is per IP address, not per port (issue 35 §1.1): a host gets no more sessions by
// binding more ports. Loopback is exempt unless limitLoopback is set.
test('rate limits: 40 SessionRequests from one IP over 40 ports get at most 30 answers', T, async (t) => {
  const server = new SOEServer(0, cryptoKey);
  server.limitLoopback = true;
  started(t, server);
  const clients = Array.from({ length: 40 }, () => new RawClient(t, server.address().port));
  const name = Buffer.from('Echo\0');
  clients.forEach((raw, i) => {
    const req = Buffer.alloc(14);
    req.writeUInt16BE(0x0001, 0);
    req.writeUInt32BE(3, 2);
    req.writeUInt32BE(2000 + i, 6);
    req.writeUInt32BE(512, 10);
    raw.send(Buffer.concat([req, name]));
  });
  await sleep(500);
  const replies = clients.filter((raw) => raw.received.some((d) => d.readUInt16BE(0) === 0x0002)).length;
  assert.ok(replies <= 30, `${replies} of 40 answered`);
});

test('start(crcLength, udpLength) sets _crcLength and _udpLength and announces them; client fields and isDeleted', T, async (t) => {
  const server = new SOEServer(0, cryptoKey);
  server._useEncryption = false;
  server._serverAddress = '127.0.0.1';
  server.start(4, 1000);
  release(t, server);
  assert.equal(server._crcLength, 4);
  assert.equal(server._udpLength, 1000);
  const raw = new RawClient(t, server.address().port);
  const reply = await raw.connect(3, 0x4321);
  assert.equal(reply[10], 4, 'CRC length 4 announced');
  assert.equal(reply.readUInt32BE(13), 1000, 'udp_length announced');
  const connected = once(server, 'connect');
  raw.send(raw.framed(Buffer.from([0x00, 0x09, 0x00, 0x00, 0x41])));
  const [client] = await connected;
  const local = raw.socket.address();
  assert.equal(client.address, '127.0.0.1');
  assert.equal(client.port, local.port);
  assert.equal(client.family, 'IPv4');
  assert.equal(client.soeClientId, `127.0.0.1:${local.port}`);
  assert.equal(client.sessionId, 0x4321);
  assert.equal(client.isDeleted, false);
  server.deleteClient(client);
  assert.equal(client.isDeleted, true);
  assert.equal(server.getSoeClient(client.soeClientId), undefined);
});
