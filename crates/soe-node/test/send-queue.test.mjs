// The send queue (index.js, Endpoint._add and _flush): a tick's messages are copied into two
// reused arrays and handed to the addon in one call; a reliable message over 64 KiB goes in a
// call of its own, from the caller's buffer. Order must hold across both paths and across the
// arrays' growth, and a caller may reuse its buffer as soon as send() returns.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { T, release } from './helpers.mjs';
import soe from '../index.js';

const { SoeServer, SoeClient } = soe;

// Message k: its index (4 bytes), then bytes (k + i) & 0xff.
function fill(buf, k) {
  buf.writeUInt32LE(k, 0);
  for (let i = 4; i < buf.length; i++) buf[i] = (k + i) & 0xff;
  return buf;
}

function check(data, k, length) {
  if (data.length !== length) return `message ${k}: ${data.length} bytes, ${length} sent`;
  if (data.readUInt32LE(0) !== k) return `message ${data.readUInt32LE(0)} arrived where ${k} was due`;
  for (let i = 4; i < data.length; i++) {
    if (data[i] !== ((k + i) & 0xff)) return `message ${k}: byte ${i} is ${data[i]}`;
  }
  return null;
}

test('one tick of small and long messages arrives whole and in order, from a reused buffer', T, async (t) => {
  // Long ones (over 64 KiB) between short ones, then enough short ones to grow the queue's
  // arrays (768 numbers, 64 KiB) several times over within the tick.
  const lengths = [10, 100_000, 20, 70_000, 5];
  for (let k = 0; k < 1500; k++) lengths.push(200 + (k % 7));
  lengths.push(66_000, 8);
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  const done = new Promise((resolve, reject) => {
    server.on('session', (s) => {
      let next = 0;
      s.on('message', (data) => {
        const wrong = check(data, next, lengths[next]);
        if (wrong !== null) reject(new Error(wrong));
        next += 1;
        if (next === lengths.length) resolve(next);
      });
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { maxQueuedMessages: 100_000 });
  release(t, session.client);
  // Every short message is written into the same buffer, which the next one overwrites before
  // the queue is flushed (at the end of this tick): send() must have taken its bytes.
  const reused = Buffer.alloc(300);
  for (let k = 0; k < lengths.length; k++) {
    const length = lengths[k];
    const buf = length > 300 ? fill(Buffer.alloc(length), k) : fill(reused.subarray(0, length), k);
    session.send(buf);
  }
  reused.fill(0xee);
  assert.equal(await done, lengths.length);
});

test('unreliable and reliable messages sent from a message handler go out at the end of its batch', T, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  server.on('session', (s) => {
    s.on('message', (data, info) => {
      // Two replies per message, through both kinds of the queue; the reply's buffer is
      // reused for the second one at once.
      const reply = Buffer.from(data);
      s.send(reply);
      reply[0] = 0x7f;
      s.sendUnreliable(reply);
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`);
  release(t, session.client);
  const got = { reliable: [], unreliable: [] };
  const COUNT = 200;
  const all = new Promise((resolve) => {
    session.on('message', (data, info) => {
      got[info.kind].push(data.toString('latin1'));
      if (got.reliable.length === COUNT) resolve();
    });
  });
  for (let k = 0; k < COUNT; k++) session.send(Buffer.from(`m${k}`, 'latin1'));
  await all;
  assert.deepEqual(got.reliable, Array.from({ length: COUNT }, (_, k) => `m${k}`));
  // Unreliable replies may be lost on the way, never changed: each is its reliable twin with
  // the first byte changed after the reliable send.
  for (const u of got.unreliable) assert.match(u, /^\x7f[0-9]+$/);
});

test("the addon's sendBatch refuses counts past the end of its arrays with a typed error", T, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  const native = server._native;
  const refused = (fn) => {
    assert.throws(fn, (e) => e.code === 'ERR_INVALID_ARG_VALUE' || /ERR_INVALID_ARG_VALUE/.test(e.message));
  };
  refused(() => native.sendBatch(new Float64Array(3), 6, Buffer.alloc(4), 4));
  refused(() => native.sendBatch(new Float64Array(3), 3, Buffer.alloc(4), 5));
  refused(() => native.sendBatch(new Float64Array(0), 0xffffffff, Buffer.alloc(0), 0));
  // Within bounds, for a session that does not exist: read, dropped, nothing full.
  assert.equal(native.sendBatch(Float64Array.of(12345, 0, 4), 3, Buffer.alloc(8), 4), null);
});
