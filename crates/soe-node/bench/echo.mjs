// Echo throughput at 64 sessions x 16 outstanding x 64 B, in one run:
//
//   addon   a Node SoeServer whose JS handler echoes every message, loaded by the Rust
//           `soe load` (so the load generator is not what limits it);
//   h1z1    the same through soe-node/h1z1: an EchoServer written as h1z1-server writes its
//           echo benchmark server (a subclass of SOEServer that echoes in 'appdata'; RC4 off,
//           as for the addon), loaded the same way;
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
import dgram from 'node:dgram';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import soe from '../index.js';
import { SOEServer } from '../h1z1.js';

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

async function addon() {
  const server = await soe.SoeServer.listen({ host: '127.0.0.1', port: 0 });
  server.on('session', (s) => s.on('message', (data, info) => s.send(data, info.channel)));
  try {
    return await load(server.address().port);
  } finally {
    await server.close();
  }
}

/** h1z1-server's echo benchmark server (benchmarks/src/echo/echo-server.ts), on the facade. */
class EchoServer extends SOEServer {
  constructor(serverPort, cryptoKey) {
    super(serverPort, cryptoKey);
    this.on('disconnect', (client) => {
      this.deleteClient(client);
    });
    this.on('appdata', (client, data) => {
      this.sendAppData(client, data);
    });
  }
}

async function h1z1() {
  const server = new EchoServer(0, Buffer.from('F70IaxuU8C/w7FPXY1ibXw==', 'base64'));
  server._useEncryption = false;
  server._serverAddress = '127.0.0.1';
  server.start();
  try {
    return await load(server.address().port);
  } finally {
    await server.stop();
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

const results = { addon: await addon(), h1z1: await h1z1(), dgram: await bareDgram(), rust: await rust() };
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
