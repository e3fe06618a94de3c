// What the flight recorder's tests share: a UDP relay between a client and a server that can
// lose every datagram from a moment on, and the checks of a capture with tshark (and the
// Lua plugin) and with `soe decode`.
import { spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import path from 'node:path';
import assert from 'node:assert/strict';
import { pkgDir, soeBin } from './helpers.mjs';

const plugin = path.join(pkgDir, '..', 'soe-dissect', 'wireshark', 'soe.lua');

/** Whether tshark runs here; its absence skips the capture checks, except under CI=true. */
export const haveTshark = (() => {
  const ok = spawnSync('tshark', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!ok && process.env.CI === 'true') throw new Error('tshark is not installed, and CI=true requires it');
  return ok;
})();

/**
 * A relay on a free loopback port in front of `server` ({ address, port }): the first peer to
 * send to it is the client. `lossy = true` drops every datagram from then on, both ways.
 */
export async function relay(t, server) {
  const socket = dgram.createSocket('udp4');
  const out = dgram.createSocket('udp4');
  const state = { lossy: false, client: null, socket };
  socket.on('message', (msg, from) => {
    state.client = from;
    if (!state.lossy) out.send(msg, server.port, server.address);
  });
  out.on('message', (msg) => {
    if (!state.lossy && state.client !== null) socket.send(msg, state.client.port, state.client.address);
  });
  await new Promise((resolve) => socket.bind(0, '127.0.0.1', resolve));
  await new Promise((resolve) => out.bind(0, '127.0.0.1', resolve));
  state.port = socket.address().port;
  t.after(() => {
    socket.close();
    out.close();
  });
  return state;
}

/** Our records in `file` as tshark with the plugin shows them: [kind, direction, hex]. */
function tsharkRecords(file) {
  const r = spawnSync('tshark', ['-r', file, '-X', `lua_script:${plugin}`, '-Y', 'soe', '-T', 'fields',
    '-E', 'separator=/t', '-e', 'soe.kind', '-e', 'soe.direction', '-e', 'soe.body', '-e', 'soe.reason'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter((l) => l !== '').map((l) => {
    const [kind, direction, body, reason] = l.split('\t');
    return { kind: Number(kind), direction: Number(direction), hex: body.replaceAll(':', ''), reason };
  });
}

/** Our records in `file` as `soe decode --json` reads them back. */
function decodedRecords(file) {
  const r = spawnSync(soeBin, ['decode', '--json', '--pcap', file], { encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  const kinds = { reliable: 0, unreliable: 1, ordered: 2, disconnect: 3, session: 4 };
  const directions = { client_to_server: 1, server_to_client: 2 };
  return r.stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l)).filter((v) => v.type === 'exported')
    .map((v) => ({ kind: kinds[v.kind], direction: directions[v.direction] ?? 0, hex: v.hex }));
}

/**
 * Checks a capture: tshark with the plugin shows `last` as the last message the server got and
 * the reason Timeout, and `soe decode` gives the same records.
 */
export function checkCapture(file, last) {
  const shown = tsharkRecords(file);
  const fromClient = shown.filter((r) => r.kind === 0 && r.direction === 1);
  assert.ok(fromClient.length > 10, `${fromClient.length} messages from the client`);
  assert.equal(fromClient.at(-1).hex, last.toString('hex'), 'the last message before the loss');
  assert.equal(shown.at(-1).kind, 3);
  assert.equal(shown.at(-1).reason, 'Timeout');
  const decoded = decodedRecords(file);
  assert.deepEqual(decoded, shown.map(({ kind, direction, hex }) => ({ kind, direction, hex })));
}
