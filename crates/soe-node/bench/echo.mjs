// Echo throughput at 64 sessions x 16 outstanding x 64 B, in one run:
//
//   addon   a Node SoeServer whose JS handler echoes every message, loaded by the Rust
//           `soe load` (so the load generator is not what limits it);
//   h1z1    the same through soe-node/h1z1: an EchoServer written as h1z1-server writes its
//           echo benchmark server (a subclass of SOEServer that echoes in 'appdata'; RC4 off,
//           as for the addon), loaded the same way;
//           both are bench/echo-server.mjs in a process of their own, as a game server runs
//           one API per process (measured in the bench's own process, the second API ran
//           after the first had run in the same process), twice each, alternating, and the
//           two runs of each are averaged;
//   dgram   a bare Node `dgram` echo server, loaded by 64 Node dgram sockets in a worker
//           thread keeping 16 datagrams outstanding each: the limit of plain Node UDP;
//   rust    the Rust `soe serve` loaded by the Rust `soe load`.
//
// Targets: addon >= 2x dgram, addon >= 50 % of rust, and h1z1 >= 90 % of addon (messages per
// second).
//   node bench/echo.mjs [--seconds S] [--json]
// Needs the release addon (`npm run build`) and the release `soe` tool
// (`cargo build --release -p soe-cli`; SOE_BIN overrides its path).
import { runSoe, startServe } from '../scripts/soe-tool.mjs';
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const seconds = Number(args[args.indexOf('--seconds') + 1] || 5) || 5;
const soeBin = process.env.SOE_BIN || path.join(here, '..', '..', '..', 'target', 'release', 'soe');
const SESSIONS = 64;
const DEPTH = 16;
const SIZE = 64;

async function load(port) {
  const args = [
    'load', '--sessions', String(SESSIONS), '--depth', String(DEPTH), '--size', String(SIZE),
    '--duration', String(seconds), '--json', `127.0.0.1:${port}`,
  ];
  const { status, out } = await runSoe(soeBin, args);
  if (status !== 0) throw new Error(`soe ${args.join(' ')}: exit ${status}\n${out}`);
  const summary = JSON.parse(out.slice(out.indexOf('{')));
  const rate = summary.messages_per_s;
  if (typeof rate !== 'number') throw new Error(`no echo rate in ${out}`);
  if (summary.messages_mismatched !== 0 || summary.sessions_failed !== 0) {
    throw new Error(`bad echoes: ${out}`);
  }
  return rate;
}

/** bench/echo-server.mjs with `api` in a process of its own, loaded by `soe load`. */
async function served(api) {
  const child = spawn(process.execPath, [path.join(here, 'echo-server.mjs'), '--api', api], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = /^listening (\d+)$/m.exec(out);
      if (m) resolve(Number(m[1]));
    });
    exited.then((code) => reject(new Error(`echo-server.mjs --api ${api} exited (${code})`)));
  });
  try {
    return await load(port);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

async function rust() {
  const { child: serve, port } = await startServe(soeBin, ['--duration', String(seconds + 30)]);
  try {
    return await load(port);
  } finally {
    serve.kill();
  }
}

const clientSource = `
const { parentPort, workerData } = require('node:worker_threads');
const dgram = require('node:dgram');
const { port, sessions, depth, size, seconds } = workerData;
let echoes = 0;
const payload = Buffer.alloc(size, 0x5a);
const sockets = [];
for (let i = 0; i < sessions; i++) {
  const s = dgram.createSocket('udp4');
  s.on('message', () => { echoes++; s.send(payload, port, '127.0.0.1'); });
  s.bind(0, '127.0.0.1', () => { for (let k = 0; k < depth; k++) s.send(payload, port, '127.0.0.1'); });
  sockets.push(s);
}
// Lost datagrams are not resent: refill the window once a second so the pipeline stays full.
const refill = setInterval(() => { for (const s of sockets) for (let k = 0; k < depth; k++) s.send(payload, port, '127.0.0.1'); }, 1000);
setTimeout(() => { clearInterval(refill); for (const s of sockets) s.close(); parentPort.postMessage(echoes / seconds); }, seconds * 1000);
`;

async function bareDgram() {
  const server = dgram.createSocket('udp4');
  server.on('message', (msg, rinfo) => server.send(msg, rinfo.port, rinfo.address));
  await new Promise((resolve) => server.bind(0, '127.0.0.1', resolve));
  const { port } = server.address();
  const worker = new Worker(clientSource, { eval: true, workerData: { port, sessions: SESSIONS, depth: DEPTH, size: SIZE, seconds } });
  const rate = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  server.close();
  await worker.terminate();
  return rate;
}

const runs = { addon: [], h1z1: [] };
for (let round = 0; round < 2; round++) {
  for (const api of ['addon', 'h1z1']) runs[api].push(await served(api));
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const results = { addon: mean(runs.addon), h1z1: mean(runs.h1z1), dgram: await bareDgram(), rust: await rust() };
const vsDgram = results.addon / results.dgram;
const vsRust = results.addon / results.rust;
const facade = results.h1z1 / results.addon;
const verdict = (ok) => (ok ? 'met' : 'MISSED');
if (args.includes('--json')) {
  console.log(JSON.stringify({ ...results, vsDgram, vsRust, facade }));
} else {
  const f = (n) => Math.round(n).toLocaleString('en-US');
  console.log(`| ${SESSIONS}x${DEPTH}, ${SIZE} B echo, ${seconds} s | msg/s | vs addon |`);
  console.log('|---|---:|---|');
  console.log(`| addon (Node SoeServer, JS handler; soe load) | ${f(results.addon)} | |`);
  console.log(`| h1z1 facade (EchoServer extends SOEServer; soe load) | ${f(results.h1z1)} | ${(facade * 100).toFixed(0)} % of addon: target >= 90 %, ${verdict(facade >= 0.9)} |`);
  console.log(`| bare Node dgram pipelined echo | ${f(results.dgram)} | addon ${vsDgram.toFixed(2)}x: target >= 2x, ${verdict(vsDgram >= 2)} |`);
  console.log(`| Rust soe serve (soe load) | ${f(results.rust)} | addon ${(vsRust * 100).toFixed(0)} %: target >= 50 %, ${verdict(vsRust >= 0.5)} |`);
}
