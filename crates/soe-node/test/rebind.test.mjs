// Issue 35 §2: a closed endpoint gives its port back at once. h1z1-server's operators stop a
// server and start it again on its port; this used to throw ERR_SOE_BIND until a garbage
// collection dropped the old endpoint's last handle. No GC runs here between close and bind
// (the test would hold the old objects anyway).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import soe from 'soe-node';
import { SOEServer } from 'soe-node/h1z1';
import { T, release } from './helpers.mjs';

const { SoeServer, SoeClient } = soe;

/** A free loopback UDP port (bound by a throwaway socket, then released). */
async function freePort() {
  const socket = createSocket('udp4');
  await new Promise((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise((resolve) => socket.close(resolve));
  return port;
}

test('the addon: close() of a server with a live session, then a new server on its port at once', T, async (t) => {
  for (let round = 0; round < 3; round++) {
    const server = new SoeServer({ host: '127.0.0.1', port: 0 });
    const { port } = server.address();
    const accepted = new Promise((resolve) => server.once('session', resolve));
    const session = await SoeClient.connect(`127.0.0.1:${port}`);
    const peer = await accepted;
    const heard = new Promise((resolve) => session.once('disconnect', (reason) => resolve(reason)));
    await server.close();
    // Every object of the old server is still reachable (server, peer, session).
    const again = release(t, new SoeServer({ host: '127.0.0.1', port }));
    assert.equal(again.address().port, port);
    assert.equal(await heard, 'managerDeleted');
    assert.equal(peer.closed, true);
    // The new server serves.
    const next = new Promise((resolve) => again.once('session', resolve));
    const other = await SoeClient.connect(`127.0.0.1:${port}`);
    await next;
    await other.close();
    await again.close();
    await session.close();
  }
});

test("the facade: SOEServer.stop() with a client connected, then start() on the same port", T, async (t) => {
  const port = await freePort();
  const server = new SOEServer(port, Buffer.alloc(0));
  server._serverAddress = '127.0.0.1';
  release(t, server);
  for (let round = 0; round < 3; round++) {
    server.start();
    const connected = new Promise((resolve) => server.once('connect', resolve));
    const session = await SoeClient.connect(`127.0.0.1:${port}`);
    const client = await connected;
    const heard = new Promise((resolve) => session.once('disconnect', (reason) => resolve(reason)));
    await server.stop();
    assert.equal(await heard, 'managerDeleted');
    assert.equal(typeof client.soeClientId, 'string');
    await session.close();
  }
  // A second SOEServer on the port of a stopped one, as a restart in the same process does.
  const other = new SOEServer(port, Buffer.alloc(0));
  other._serverAddress = '127.0.0.1';
  release(t, other);
  other.start();
  assert.equal(other.address().port, port);
});
