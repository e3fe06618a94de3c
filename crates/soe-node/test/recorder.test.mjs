// The flight recorder in Node: a session that dies of 100 % loss after 20 s of traffic hands its
// recording (a pcapng capture) to 'disconnect', and writes it to `recordDir`; tshark with the
// Lua plugin shows the last message before the loss and the timeout as the reason, and `soe
// decode` of the file gives the same records. A live session's recording is taken on request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import soe from '../index.js';
import { release, needsSoe } from './helpers.mjs';
import { relay, checkCapture, haveTshark } from './recording.mjs';

const SECONDS = 20;

test('a session lost after 20 s of traffic leaves its recording on disconnect and in recordDir', { timeout: 120_000, skip: needsSoe }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'soe-recorder-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const server = release(t, await soe.SoeServer.listen({
    host: '127.0.0.1', port: 0, recordSessions: true, idleTimeout: 2000, recordDir: dir,
  }));
  const link = await relay(t, { address: '127.0.0.1', port: server.address().port });
  const got = [];
  const ended = new Promise((resolve) => {
    server.on('session', (s) => {
      s.on('message', (data) => got.push(Buffer.from(data)));
      s.on('disconnect', (reason, info) => resolve({ reason, info, session: s }));
    });
  });
  const written = new Promise((resolve) => server.once('recording', (file) => resolve(file)));
  const client = release(t, new soe.SoeClient({ host: '127.0.0.1', port: 0, idleTimeout: 0 }));
  const session = await client.connect(`127.0.0.1:${link.port}`);
  assert.equal(session.record(), true, 'a live session records on request');
  for (let i = 0; i < SECONDS * 10; i++) {
    session.send(`client message ${i}: position=12.5,0.0,-3.25`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const live = session.takeRecording();
  assert.ok(Buffer.isBuffer(live) && live.length > 1000, 'the client session recording so far');
  link.lossy = true;
  const { reason, info } = await ended;
  assert.equal(reason, 'timeout');
  assert.ok(Buffer.isBuffer(info.recording), "'disconnect' carries the recording");
  assert.deepEqual([...info.recording.subarray(0, 4)], [0x0a, 0x0d, 0x0d, 0x0a], 'a pcapng capture');
  assert.ok(got.length >= SECONDS * 9, `${got.length} messages before the loss`);
  const file = await written;
  assert.ok(file.startsWith(dir));
  if (haveTshark) {
    const own = path.join(dir, 'from-disconnect.pcapng');
    writeFileSync(own, info.recording);
    checkCapture(own, got.at(-1));
    checkCapture(file, got.at(-1));
  }
});
