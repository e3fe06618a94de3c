// What the tests share: the package's paths, the `soe` tool, servers and children that are
// released when their test ends (passed or failed), and a child `node` run under a deadline.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import soe from '../index.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The package directory (crates/soe-node). */
export const pkgDir = path.join(here, '..');

/** The Rust `soe` tool from this workspace (built by `cargo xtask node`), if present. */
export const soeBin = process.env.SOE_BIN || path.join(pkgDir, '..', '..', 'target', 'debug', 'soe');
export const haveSoe = existsSync(soeBin);
/** A `skip` option for the tests that drive the `soe` tool. */
export const needsSoe = !haveSoe && `no soe binary at ${soeBin} (cargo build -p soe-cli)`;

/**
 * Options of a test: a deadline, so that a test that goes wrong fails instead of hanging. 30 s,
 * or SOE_TEST_TIMEOUT_MS where everything runs many times slower (the arm64 addon under
 * qemu-user: `cargo xtask cross --target linux-arm64 --tests`).
 */
export const T = { timeout: Number(process.env.SOE_TEST_TIMEOUT_MS) || 30_000 };

/** Closes `endpoint` (a SoeServer, SoeClient or SOEServer) when the test ends, however it ends. */
export function release(t, endpoint) {
  t.after(async () => {
    if (typeof endpoint.stop === 'function') await endpoint.stop();
    else await endpoint.close();
  });
  return endpoint;
}

/** Kills `child` when the test ends, if it is still running. */
export function reap(t, child) {
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

/** A Node server on a free loopback port that echoes every message the way it came. */
export async function echoServer(t, options = {}) {
  const server = release(t, await soe.SoeServer.listen({ host: '127.0.0.1', port: 0, ...options }));
  server.on('session', (s) => {
    s.on('message', (data, info) => {
      if (info.unreliable) s.sendUnreliable(data);
      else s.send(data, info.channel);
    });
  });
  return server;
}

/** Message `i`: its bytes derive from `i`; every fifth is 20 KB (fragments). */
export function message(i) {
  const len = i % 5 === 0 ? 20_000 : 1 + ((i * 131) % 700);
  const buf = Buffer.alloc(len);
  for (let j = 0; j < len; j++) buf[j] = (i * 31 + j * 7) & 0xff;
  return buf;
}

/**
 * A UDP relay on the JS thread, in front of a server on 127.0.0.1:`serverPort`; resolves with
 * the relay's port, for a client to connect to. Every datagram either way waits for the JS
 * thread, so that while JS runs (a handler, a loop of sends), nothing crosses: no ack reaches a
 * sender, however fast the addon's own threads are. A test whose precondition is "the queue
 * could not drain" makes it certain this way instead of likely.
 */
export async function jsThreadRelay(t, serverPort) {
  const socket = dgram.createSocket('udp4');
  await new Promise((resolve) => socket.bind(0, '127.0.0.1', resolve));
  let client = null;
  socket.on('message', (datagram, from) => {
    if (from.port === serverPort) {
      if (client !== null) socket.send(datagram, client.port, client.address);
    } else {
      client = from;
      socket.send(datagram, serverPort, '127.0.0.1');
    }
  });
  t.after(() => socket.close());
  return socket.address().port;
}

/** The next `count` messages of `emitter`'s `event`, as [data, info] pairs. */
export function collect(emitter, count, event = 'message') {
  return new Promise((resolve) => {
    const got = [];
    const on = (...args) => {
      got.push(args);
      if (got.length === count) {
        emitter.off(event, on);
        resolve(got);
      }
    };
    emitter.on(event, on);
  });
}

/**
 * Runs `node` on `source` (ES module text) in `cwd`; resolves with its status, output and
 * whether it had to be killed because it was still running after `deadlineMs`.
 */
export function runNode(t, source, { cwd = pkgDir, deadlineMs = 15_000, env = process.env, args = [] } = {}) {
  return new Promise((resolve, reject) => {
    const child = reap(t, spawn(process.execPath, [...args, '--input-type=module', '-e', source], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, deadlineMs);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, killed });
    });
  });
}

/** Code that loads the package from a child process. */
export const importPackage = `import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(path.join(pkgDir, 'index.js'))});
const soe = require(${JSON.stringify(path.join(pkgDir, 'index.js'))});`;

/** The RC4 keystream's first `n` bytes for `key`, as the reference for what a wire carries. */
export function rc4Keystream(key, n) {
  const s = Array.from({ length: 256 }, (_, i) => i);
  for (let i = 0, j = 0; i < 256; i++) {
    j = (j + s[i] + key[i % key.length]) & 0xff;
    [s[i], s[j]] = [s[j], s[i]];
  }
  const out = Buffer.alloc(n);
  for (let k = 0, i = 0, j = 0; k < n; k++) {
    i = (i + 1) & 0xff;
    j = (j + s[i]) & 0xff;
    [s[i], s[j]] = [s[j], s[i]];
    out[k] = s[(s[i] + s[j]) & 0xff];
  }
  return out;
}

/** `a` XOR `b` (as long as `a`). */
export function xor(a, b) {
  const out = Buffer.alloc(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] ^ b[i];
  return out;
}
