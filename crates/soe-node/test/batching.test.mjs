// Events handed to JS in batches (eventBatchMs, issue 29): whatever the window, every message
// of every session arrives, once, in order, and each session's replies go back the same way;
// a bad window is refused with Node's codes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { T, release, echoServer, message } from './helpers.mjs';
import soe from '../index.js';

const { SoeServer, SoeClient } = soe;

for (const eventBatchMs of [0, 1, 25]) {
  test(`eventBatchMs ${eventBatchMs}: eight sessions' echoes arrive whole and in order`, T, async (t) => {
    const server = await echoServer(t, { eventBatchMs });
    const target = `127.0.0.1:${server.address().port}`;
    const runs = [];
    for (let c = 0; c < 8; c++) {
      runs.push((async () => {
        const session = await SoeClient.connect(target, { eventBatchMs });
        release(t, session.client);
        let next = 0;
        const done = new Promise((resolve, reject) => {
          session.on('message', (data) => {
            if (!data.equals(message(next + c))) reject(new Error(`session ${c}: echo ${next} differs`));
            next += 1;
            if (next === 60) resolve();
          });
        });
        // Bursts and gaps, so that some events come together and some alone.
        for (let i = 0; i < 60; i++) {
          session.send(message(i + c));
          if (i % 10 === 9) await new Promise((resolve) => setTimeout(resolve, 3));
        }
        await done;
        assert.equal(next, 60);
      })());
    }
    await Promise.all(runs);
  });
}

// The window only gathers events that come slowly: while batches leave full, none is held, or
// the window would cap the rate at one batch per window (the addon's saturation echo fell to a
// third when it did). With a 1,000 ms window, 4,000 messages that arrive at once must not
// take one window per batch (about 15 windows of 256 events): a held batch would need 15 s.
test('eventBatchMs holds no full batch: 4,000 messages at once are not paced by the window', T, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0, eventBatchMs: 1000 }));
  let received = 0;
  const all = new Promise((resolve) => {
    server.on('session', (s) => s.on('message', () => {
      received += 1;
      if (received === 4000) resolve();
    }));
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { eventBatchMs: 0 });
  release(t, session.client);
  const small = Buffer.alloc(16, 7);
  const started = Date.now();
  for (let i = 0; i < 4000; i++) session.send(small);
  await all;
  const took = Date.now() - started;
  assert.equal(received, 4000);
  assert.ok(took < 7_000, `4,000 messages took ${took} ms with a 1,000 ms window`);
});

test('a bad eventBatchMs is refused with the option named', T, async () => {
  for (const [bad, Type, code] of [
    [-1, RangeError, 'ERR_INVALID_ARG_VALUE'],
    [1001, RangeError, 'ERR_INVALID_ARG_VALUE'],
    [0.5, RangeError, 'ERR_INVALID_ARG_VALUE'],
    ['1', TypeError, 'ERR_INVALID_ARG_TYPE'],
  ]) {
    for (const open of [
      () => SoeServer.listen({ host: '127.0.0.1', port: 0, eventBatchMs: bad }),
      () => SoeClient.connect('127.0.0.1:9', { eventBatchMs: bad }),
    ]) {
      const e = await open().then(() => null, (err) => err);
      assert.ok(e instanceof Type, `${bad}: ${e}`);
      assert.equal(e.code, code);
      assert.ok(e.message.includes('options.eventBatchMs'), e.message);
    }
  }
});

/** Round trips (ms) of `rounds` ping-pongs to an echo server whose window is `eventBatchMs`. */
async function pingPong(t, eventBatchMs, rounds) {
  const server = await echoServer(t, { eventBatchMs });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { eventBatchMs: 0 });
  release(t, session.client);
  const times = [];
  const ping = Buffer.alloc(8, 1);
  for (let i = 0; i < rounds + 20; i++) {
    const echoed = new Promise((resolve) => session.once('message', resolve));
    const started = process.hrtime.bigint();
    session.send(ping);
    await echoed;
    if (i >= 20) times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return times.sort((a, b) => a - b);
}

// The promise of eventBatchMs (README, index.d.ts): an event that comes while events keep
// coming waits at most until eventBatchMs after the previous call into JS. In a ping-pong the
// server's next message always comes within a millisecond of its previous call, so each is
// held: its round trip exceeds the unheld one's by the hold (0 to 1 ms).
test('eventBatchMs 1 holds an event at most about a millisecond (median of 300 ping-pongs)', T, async (t) => {
  const unheld = await pingPong(t, 0, 300);
  const held = await pingPong(t, 1, 300);
  const median = (xs) => xs[Math.floor(xs.length / 2)];
  const hold = median(held) - median(unheld);
  console.log(`eventBatchMs 0: median ${median(unheld).toFixed(3)} ms; eventBatchMs 1: median ${median(held).toFixed(3)}, ` +
    `p90 ${held[Math.floor(held.length * 0.9)].toFixed(3)}, max ${held[held.length - 1].toFixed(3)} ms; hold ${hold.toFixed(3)} ms`);
  assert.ok(hold <= 1.25, `held ${hold.toFixed(3)} ms at the median`);
});
