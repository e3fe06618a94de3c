// soe-node/h1z1: h1z1-server's SOEServer surface, each test written the way h1z1-server's own
// code uses the class (its echo benchmark, its GatewayServer's login, its LoginServer's
// clients, its ZoneServer's ping and flood checks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { SOEServer, SOEOutputChannels, SOEClient } from 'soe-node/h1z1';
import { SoeClient } from 'soe-node';
import { runSoe } from '../scripts/soe-tool.mjs';
import { T, release, reap, collect, message, soeBin, needsSoe, rc4Keystream, xor } from './helpers.mjs';

// h1z1-server's own login and gateway key (its benchmarks use it too).
const cryptoKey = Buffer.from('F70IaxuU8C/w7FPXY1ibXw==', 'base64');

/** h1z1-server's echo benchmark server, as it writes it: a subclass that echoes in 'appdata'. */
class EchoServer extends SOEServer {
  constructor(serverPort, key) {
    super(serverPort, key);
    this.on('disconnect', (client) => {
      this.deleteClient(client);
    });
    this.on('appdata', (client, data) => {
      this.sendAppData(client, data);
    });
  }
}

/** Starts `server` on a free loopback port, stopped when the test ends. */
function started(t, server, crcLength, udpLength) {
  server._serverAddress = '127.0.0.1';
  server.start(crcLength, udpLength);
  release(t, server);
  return server;
}

function once(emitter, event) {
  return new Promise((resolve) => emitter.once(event, (...args) => resolve(args)));
}

test('an EchoServer written as h1z1-server writes one echoes every message of `soe load`, RC4 on', { ...T, skip: needsSoe }, async (t) => {
  const server = started(t, new EchoServer(0, cryptoKey), 2, 512);
  const connects = [];
  server.on('connect', (client) => connects.push(client));
  const { status, out } = await runSoe(soeBin, [
    'load', '--sessions', '4', '--messages', '400', '--size', '1-3000', '--depth', '16',
    '--rc4-key', cryptoKey.toString('base64'), '--json', `127.0.0.1:${server.address().port}`,
  ]);
  assert.equal(status, 0, out);
  const summary = JSON.parse(out.slice(out.indexOf('{')));
  assert.equal(summary.sessions_failed, 0, out);
  assert.equal(summary.messages_mismatched, 0, out);
  assert.equal(summary.messages_verified, 1600, out);
  assert.equal(connects.length, 4);
  for (const client of connects) {
    assert.ok(client instanceof SOEClient);
    assert.equal(client.soeClientId, `${client.address}:${client.port}`);
    assert.equal(client.address, '127.0.0.1');
    assert.equal(client.protocolName, 'SoeEcho');
    assert.equal(typeof client.sessionId, 'number');
    assert.equal(client.useEncryption, true);
  }
  assert.equal(new Set(connects.map((c) => c.sessionId)).size, 4, 'each client its own session id');
});

test('the EchoServer echoes the Node client: 200 messages, 20 KB ones in fragments, in order', T, async (t) => {
  const server = started(t, new EchoServer(0, cryptoKey));
  const connected = once(server, 'connect');
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey, protocol: 'LoginUdp_11' });
  release(t, session.client);
  const echoes = collect(session, 200);
  for (let i = 0; i < 200; i++) session.send(message(i));
  (await echoes).forEach(([data, info], i) => {
    assert.deepEqual(data, message(i), `echo ${i}`);
    assert.equal(info.kind, 'reliable');
  });
  const [client] = await connected;
  assert.equal(client.protocolName, 'LoginUdp_11', 'the name the client asked for, as LoginServer reads it');
  assert.equal(server.getSoeClient(client.soeClientId), client);
  // The client leaves: 'disconnect' with the same object, which the server then deletes.
  const left = once(server, 'disconnect');
  await session.close();
  const [gone] = await left;
  assert.equal(gone, client);
  assert.equal(server.getSoeClient(client.soeClientId), undefined);
});

/**
 * h1z1-server's GatewayServer: sessions start in plaintext; on a LoginRequest it switches RC4 on
 * for the client and replies, encrypted. Here a request 'Off' switches it off again (toggle).
 */
class Gateway extends SOEServer {
  constructor(serverPort, key) {
    super(serverPort, key);
    this._useEncryption = false;
    this.keepAliveTimeoutTime = 20000;
    this.on('disconnect', (client) => this.deleteClient(client));
    this.on('appdata', (client, data, isRawData) => {
      if (isRawData) return;
      const text = data.toString('latin1');
      if (text === 'LoginRequest') {
        this.setEncryption(client, true);
        this.sendAppData(client, Buffer.from('LoginReply'));
        this.sendAppData(client, Buffer.from('Welcome, encrypted'));
      } else if (text === 'Off') {
        this.toggleEncryption(client);
        this.sendAppData(client, Buffer.from('Plain again'));
      } else {
        this.sendAppData(client, data);
      }
    });
  }
}

test('a gateway-style login: plaintext request, then setEncryption(client, true) and an encrypted reply', T, async (t) => {
  const server = started(t, new Gateway(0, cryptoKey));
  const connected = once(server, 'connect');
  // A client that switches at the same point: right after sending its login request.
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey, rc4AtStart: false });
  release(t, session.client);
  const replies = collect(session, 2);
  session.send(Buffer.from('LoginRequest'));
  session.setEncryption(true);
  const [[reply], [welcome]] = await replies;
  assert.equal(reply.toString(), 'LoginReply');
  assert.equal(welcome.toString(), 'Welcome, encrypted');
  const [client] = await connected;
  assert.equal(client.useEncryption, true);
  // Encrypted both ways from here: the server decrypts what it echoes and encrypts it again.
  const echoes = collect(session, 30);
  for (let i = 0; i < 30; i++) session.send(message(i));
  (await echoes).forEach(([data], i) => assert.deepEqual(data, message(i), `echo ${i}`));
  // toggleEncryption: both sides switch off at the request.
  const plain = collect(session, 1);
  session.send(Buffer.from('Off'));
  session.setEncryption(false);
  assert.equal((await plain)[0][0].toString(), 'Plain again');
  assert.equal(client.useEncryption, false);
  const more = collect(session, 1);
  session.send(Buffer.from('in the clear'));
  assert.equal((await more)[0][0].toString(), 'in the clear');
});

test('a client that does not switch reads the RC4 keystream from its first byte: the switch is real', T, async (t) => {
  const server = started(t, new Gateway(0, cryptoKey));
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  const replies = collect(session, 2);
  session.send(Buffer.from('LoginRequest'));
  const [[reply], [welcome]] = await replies;
  const plainReply = Buffer.from('LoginReply');
  const plainWelcome = Buffer.from('Welcome, encrypted');
  assert.notDeepEqual(reply, plainReply, 'garbage to a client that did not switch');
  // The ciphertext is the plaintext under the keystream from position 0 (the plaintext login
  // request did not advance it), and the second reply continues where the first ended: where
  // h1z1-server's RC4 stands at its first encrypted message.
  const stream = rc4Keystream(cryptoKey, plainReply.length + plainWelcome.length);
  assert.deepEqual(reply, xor(plainReply, stream));
  assert.deepEqual(welcome, xor(plainWelcome, stream.subarray(plainReply.length)));
});

test('getSoeClient(id).avgPing and outputStream.isFlooded() move under a lossy relay', { ...T, timeout: 60_000, skip: needsSoe }, async (t) => {
  const BURST = 6000;
  const server = started(t, new SOEServer(0, cryptoKey));
  let client = null;
  server.on('connect', (c) => {
    client = c;
  });
  server.on('appdata', (c, data) => {
    if (data.toString() === 'burst') {
      for (let i = 0; i < BURST; i++) {
        const b = Buffer.alloc(200, i & 0xff);
        b.writeUInt32LE(i);
        server.sendAppData(c, b);
      }
    } else {
      server.sendAppData(c, data);
    }
  });
  // soe proxy: 40 ms each way and 5 % loss each way, seeded.
  const proxy = reap(t, spawn(soeBin, [
    'proxy', '--listen', '127.0.0.1:0', '--upstream', `127.0.0.1:${server.address().port}`,
    '--delay', '40', '--loss', '0.05', '--seed', '7', '--quiet',
  ], { stdio: ['ignore', 'pipe', 'pipe'] }));
  const proxyPort = await new Promise((resolve, reject) => {
    let text = '';
    const look = (d) => {
      text += d;
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(text);
      if (m) resolve(Number(m[1]));
    };
    proxy.stdout.on('data', look);
    proxy.stderr.on('data', look);
    proxy.on('exit', (code) => reject(new Error(`soe proxy exited (${code}): ${text}`)));
  });
  const session = await SoeClient.connect(`127.0.0.1:${proxyPort}`, { rc4Key: cryptoKey, connectTimeout: 20_000 });
  release(t, session.client);
  const warmup = collect(session, 20);
  for (let i = 0; i < 20; i++) session.send(message(i + 1));
  await warmup;
  // As ZoneServer2016 reads it, through its gateway: by id.
  const seen = server.getSoeClient(client.soeClientId);
  assert.equal(seen, client);
  assert.ok(seen.avgPing >= 80, `the relay adds 80 ms a round trip: avgPing ${seen.avgPing}`);
  assert.equal(seen.outputStream.isFlooded(), false);
  // A burst larger than the session's queue: flooded until it drains.
  const all = collect(session, BURST);
  session.send(Buffer.from('burst'));
  let flooded = false;
  while (!flooded) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    flooded = seen.outputStream.isFlooded();
  }
  const burst = await all;
  burst.forEach(([data], i) => assert.equal(data.readUInt32LE(0), i, `burst message ${i} in order`));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(seen.outputStream.isFlooded(), false, 'drained');
  const [lossLine, orderLine, pingLine] = seen.getNetworkStats();
  const loss = Number(/^Packet loss rate ([\d.]+)%$/.exec(lossLine)[1]);
  assert.ok(loss > 0, `5 % loss shows: ${lossLine}`);
  assert.match(orderLine, /^Packet outOfOrder rate [\d.]+%$/);
  assert.match(pingLine, /^Avg ping \d+ms$/);
  assert.match(server.getNetworkStats()[0], /^Avg Server lag : [\d.]+ms$/);
});

test('deleteClient ends the session for the client, after what was sent before it', T, async (t) => {
  const server = started(t, new SOEServer(0, cryptoKey));
  const disconnects = [];
  server.on('disconnect', (c) => disconnects.push(c));
  server.on('appdata', (client, data) => {
    if (data.toString() === 'delete me') {
      server.sendAppData(client, Buffer.from('bye'));
      server.deleteClient(client);
      assert.equal(server.getSoeClient(client.soeClientId), undefined, 'forgotten at once');
      server.sendAppData(client, Buffer.from('dropped')); // a no-op, as in h1z1-server
      server.setEncryption(client, false); // likewise
    }
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  const got = [];
  session.on('message', (data) => got.push(data.toString()));
  const ended = once(session, 'disconnect');
  session.send(Buffer.from('delete me'));
  const [reason, info] = await ended;
  assert.equal(reason, 'application');
  assert.equal(info.byPeer, true, 'the client heard a Disconnect');
  assert.deepEqual(got, ['bye']);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(disconnects, [], "no 'disconnect' for a client the server deleted");
});

test('stop() resolves, and every client hears a Disconnect', T, async (t) => {
  const server = started(t, new EchoServer(0, cryptoKey));
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  const echoed = collect(session, 1);
  session.send(Buffer.from('hello'));
  await echoed;
  const ended = once(session, 'disconnect');
  await server.stop();
  const [reason, info] = await ended;
  assert.equal(reason, 'managerDeleted');
  assert.equal(info.byPeer, true);
  await server.stop(); // a second stop does nothing
});

test('SOEServer.preset (an addition) reaches start(): an unknown name is refused, free-realms echoes', T, async (t) => {
  const unknown = new SOEServer(0, cryptoKey);
  unknown._serverAddress = '127.0.0.1';
  unknown.preset = 'eq2';
  assert.throws(() => unknown.start(), { code: 'ERR_INVALID_ARG_VALUE', message: /free-realms/ });
  // The Free Realms client's 64 KiB cap in flight: 20 KB messages still go whole, in order.
  const server = new EchoServer(0, cryptoKey);
  server.preset = 'free-realms';
  started(t, server);
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey });
  release(t, session.client);
  const echoes = collect(session, 20);
  for (let i = 0; i < 20; i++) session.send(message(i));
  (await echoes).forEach(([data], i) => assert.deepEqual(data, message(i), `echo ${i}`));
});

test('keepAliveTimeoutTime is honoured: a silent client is disconnected', T, async (t) => {
  const server = new SOEServer(0, cryptoKey);
  server.keepAliveTimeoutTime = 400;
  started(t, server);
  const left = once(server, 'disconnect');
  const connected = once(server, 'connect');
  // A client that stays silent: no heartbeat before 60 s.
  const { SoeClient: Client } = await import('soe-node');
  const session = await Client.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey, idleTimeout: 0 });
  release(t, session.client);
  session.send(Buffer.from('one message, then silence'));
  const [client] = await connected;
  const [gone] = await left;
  assert.equal(gone, client);
  assert.equal(server.getSoeClient(client.soeClientId), undefined);
});

test("the channels: 'Reliable', 'Ordered', 'Raw', raw reception, and a wrong channel", T, async (t) => {
  const plain = new SOEServer(0, cryptoKey);
  plain._useEncryption = false;
  const server = started(t, plain);
  const raw = [];
  server.on('appdata', (client, data, isRawData) => {
    if (isRawData) raw.push(data.toString());
    if (data.toString() === 'go') {
      server.sendAppData(client, Buffer.from('reliable'), SOEOutputChannels.Reliable);
      server.sendAppData(client, Buffer.from('\x00ordered'), SOEOutputChannels.Ordered);
      server.sendAppData(client, Buffer.from('raw'), SOEOutputChannels.Raw);
      server.sendUnbufferedAppData(client, Buffer.from('unbuffered'));
      assert.throws(() => server.sendAppData(client, Buffer.from('x'), 'Fast'), { code: 'ERR_INVALID_ARG_VALUE' });
    }
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { rc4Key: cryptoKey, rc4AtStart: false });
  release(t, session.client);
  const got = collect(session, 4);
  session.send(Buffer.from('go'));
  const kinds = (await got).map(([data, info]) => `${data.toString('latin1')}/${info.kind}`).sort();
  assert.deepEqual(kinds, ['\x00ordered/ordered', 'raw/unreliable', 'reliable/reliable', 'unbuffered/reliable']);
  // Unreliable datagrams from the client reach 'appdata' only with _allowRawDataReception.
  session.sendUnreliable(Buffer.from('ignored'));
  await new Promise((resolve) => setTimeout(resolve, 100));
  server._allowRawDataReception = true;
  session.sendUnreliable(Buffer.from('seen'));
  await new Promise((resolve) => {
    const wait = () => (raw.length > 0 ? resolve() : setTimeout(wait, 10));
    wait();
  });
  assert.deepEqual(raw, ['seen']);
});

test('the surface h1z1-server touches is all there', T, async () => {
  const server = new SOEServer(0, cryptoKey);
  for (const method of ['start', 'stop', 'sendAppData', 'sendUnbufferedAppData', 'setEncryption', 'toggleEncryption', 'deleteClient', 'getSoeClient', 'getNetworkStats', 'on', 'emit']) {
    assert.equal(typeof server[method], 'function', method);
  }
  assert.equal(server._useEncryption, true);
  assert.equal(server.keepAliveTimeoutTime, 40000);
  assert.deepEqual({ ...SOEOutputChannels }, { Reliable: 'Reliable', Raw: 'Raw', Ordered: 'Ordered' });
  assert.deepEqual(server.getNetworkStats(), ['Avg Server lag : 0ms']);
  assert.equal(server.getSoeClient('127.0.0.1:1'), undefined);
  await server.stop(); // before start: nothing to do
  assert.throws(() => new SOEClient(), { code: 'ERR_ILLEGAL_CONSTRUCTOR' });
  // From CommonJS too.
  const { createRequire } = await import('node:module');
  const required = createRequire(import.meta.url)('soe-node/h1z1');
  assert.equal(required.SOEServer, SOEServer);
});
