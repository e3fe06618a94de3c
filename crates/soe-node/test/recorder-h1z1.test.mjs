// The flight recorder in the h1z1 facade (an addition beside h1z1-server's surface): with
// `recordSessions`, a client that dies of 100 % loss after 20 s of traffic has `recording` when
// 'disconnect' is emitted, and with `recordDir` the file is written ('recording' follows);
// tshark with the plugin and `soe decode` read it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import soe from '../index.js';
import h1z1 from '../h1z1.js';
import { release, needsSoe } from './helpers.mjs';
import { relay, checkCapture, haveTshark } from './recording.mjs';

const SECONDS = 20;

test('the facade: a client lost after 20 s of traffic has its recording, and recordDir its file', { timeout: 120_000, skip: needsSoe }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'soe-recorder-h1z1-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const server = new h1z1.SOEServer(0, undefined);
  server._serverAddress = '127.0.0.1';
  server.keepAliveTimeoutTime = 2000;
  server.recordSessions = true;
  server.recordDir = dir;
  server.start();
  t.after(() => server.stop());
  const link = await relay(t, { address: '127.0.0.1', port: server.address().port });
  const got = [];
  server.on('appdata', (client, data) => got.push(data));
  const gone = new Promise((resolve) => server.on('disconnect', (client) => resolve(client)));
  const written = new Promise((resolve) => server.once('recording', (file, client) => resolve({ file, client })));
  const client = release(t, new soe.SoeClient({ host: '127.0.0.1', port: 0, idleTimeout: 0, rc4Key: undefined }));
  const session = await client.connect(`127.0.0.1:${link.port}`);
  for (let i = 0; i < SECONDS * 10; i++) {
    session.send(`client message ${i}: position=12.5,0.0,-3.25`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  link.lossy = true;
  const lost = await gone;
  assert.ok(Buffer.isBuffer(lost.recording), 'the client has its recording at disconnect');
  assert.ok(got.length >= SECONDS * 9, `${got.length} messages before the loss`);
  const { file, client: recorded } = await written;
  assert.equal(recorded, lost);
  if (haveTshark) checkCapture(file, got.at(-1));
});
