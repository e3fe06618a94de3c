// Order under backpressure (issue 30, 8): while the addon passes a session's waiting messages
// on as room appears (its pump thread, one at a time with a queue of one), a send must not go
// straight to the session ahead of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { release } from './helpers.mjs';
import soe from '../index.js';

const { SoeServer, SoeClient } = soe;
const COUNT = 100_000;

test(`${COUNT.toLocaleString('en-US')} messages sent with maxQueuedMessages: 1 arrive in order`, { timeout: 120_000 }, async (t) => {
  const server = release(t, await SoeServer.listen({ host: '127.0.0.1', port: 0 }));
  const done = new Promise((resolve, reject) => {
    server.on('session', (s) => {
      let next = 0;
      s.on('message', (data) => {
        const got = data.readUInt32LE(0);
        if (got !== next) reject(new Error(`message ${got} arrived where ${next} was due`));
        next += 1;
        if (next === COUNT) resolve(next);
      });
    });
  });
  const session = await SoeClient.connect(`127.0.0.1:${server.address().port}`, { maxQueuedMessages: 1 });
  release(t, session.client);
  // 'drain' means that nothing waits any more: a late drain of an earlier wait, which came
  // after newer messages had to wait, must not be taken for it.
  let drains = 0;
  const early = [];
  session.on('drain', () => {
    drains += 1;
    const waiting = session.stats().pendingMessages;
    if (waiting !== 0 && early.length < 5) early.push(waiting);
  });
  // A few messages a turn, so that the waiting queue is often down to the last message the
  // pump passes on when the next send comes; send()'s false is not waited on (the message is
  // kept and must go out in order all the same).
  let sent = 0;
  let refused = 0;
  await new Promise((resolve) => {
    const turn = () => {
      const burst = 1 + (sent % 3);
      for (let k = 0; k < burst && sent < COUNT; k++, sent++) {
        const b = Buffer.allocUnsafe(4);
        b.writeUInt32LE(sent);
        if (!session.send(b)) refused += 1;
      }
      if (sent < COUNT) setImmediate(turn);
      else resolve();
    };
    turn();
  });
  assert.equal(await done, COUNT);
  assert.ok(refused > 0, 'the queue of one was full at times');
  // A sender that never waits for 'drain' gets one once it stops and everything has gone.
  if (session.writableNeedDrain) await new Promise((resolve) => session.once('drain', resolve));
  assert.ok(drains > 0);
  assert.deepEqual(early, [], `'drain' while messages still waited (${drains} drains)`);
});
