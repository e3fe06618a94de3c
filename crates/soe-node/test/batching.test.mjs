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
