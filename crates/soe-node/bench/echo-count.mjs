// An SOE echo server on soe-node, for tools that measure it from outside (the Rust benchmark
// report spawns it to measure the CPU per message of the addon's API and of the h1z1 facade
// under a fixed load). Kept stable: its flags, its one line of output and its exit are a
// contract.
//
//   node bench/echo-server.mjs [--port N] [--api addon|h1z1] [--crc-length 0|2|4]
//                              [--udp-length N] [--host IP] [--rc4-key BASE64]
//                              [--event-thread pump|js]
//
//   --port N         the UDP port; 0 (the default) picks a free one
//   --api            addon (default): a SoeServer whose 'message' handler echoes;
//                    h1z1: an EchoServer written as h1z1-server writes one (a subclass of
//                    soe-node/h1z1's SOEServer that echoes in 'appdata')
//   --crc-length     the CRC trailer the server announces (default 2)
//   --udp-length     the largest datagram it announces (default 512)
//   --host           the address to bind (default 127.0.0.1)
//   --rc4-key        RC4 on from the start with this key (default: no RC4)
//   --event-thread   where the endpoint runs (options.eventThread; default: the addon's)
//
// The addon is found as `require('soe-node')` finds it: the file SOE_NODE_ADDON names when it
// is set (any name: SOE_NODE_ADDON=target/release/libsoe_node.so works), else the platform
// package, else the local build next to index.js (`npm run build` copies the release build
// there).
//
// Any application protocol name is accepted (`soe load` sends SoeEcho). Every message goes
// back the way it came: reliable on its channel, unreliable as unreliable, ordered as ordered
// (the h1z1 API: reliable data with sendAppData, as h1z1-server's echo benchmark does, and
// raw data, received with _allowRawDataReception set, back on the 'Raw' channel).
//
// When it is ready it prints exactly one line on stdout, `listening <port>`, and nothing else
// there (errors go to stderr, with exit status 1: bad flags, a port in use). It closes its
// sessions (each client hears a Disconnect) and exits with status 0 on SIGTERM or SIGINT, or
// when its stdin closes if stdin is a pipe or a socket (so a parent that dies takes it along);
// with stdin at /dev/null or a terminal only a signal stops it.
import fs from 'node:fs';
import soe from '../index.js';
import { SOEServer } from '../h1z1.js';

function fail(message) {
  process.stderr.write(`echo-server: ${message}\n`);
  process.exit(1);
}

function parse(argv) {
  const o = { port: 0, api: 'addon', host: '127.0.0.1', crcLength: undefined, udpLength: undefined, rc4Key: undefined };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    const number = () => {
      if (value === undefined || !/^\d+$/.test(value)) fail(`${flag} takes a number`);
      i += 1;
      return Number(value);
    };
    switch (flag) {
      case '--port': o.port = number(); break;
      case '--crc-length': o.crcLength = number(); break;
      case '--udp-length': o.udpLength = number(); break;
      case '--api':
        if (value !== 'addon' && value !== 'h1z1') fail('--api takes addon or h1z1');
        o.api = value;
        i += 1;
        break;
      case '--host':
        if (value === undefined) fail('--host takes an IP address');
        o.host = value;
        i += 1;
        break;
      case '--event-thread':
        if (value !== 'pump' && value !== 'js') fail('--event-thread takes pump or js');
        o.eventThread = value;
        i += 1;
        break;
      case '--rc4-key':
        if (value === undefined) fail('--rc4-key takes a base64 key');
        o.rc4Key = Buffer.from(value, 'base64');
        i += 1;
        break;
      default:
        fail(`unknown flag ${flag}`);
    }
  }
  return o;
}

class EchoServer extends SOEServer {
  constructor(serverPort, cryptoKey) {
    super(serverPort, cryptoKey);
    this._allowRawDataReception = true;
    this.on('disconnect', (client) => {
      this.deleteClient(client);
    });
    this.on('appdata', (client, data, isRawData) => {
      this.sendAppData(client, data, isRawData ? 'Raw' : 'Reliable');
    });
  }
}

function startAddon(o) {
  const server = new soe.SoeServer({
    host: o.host,
    port: o.port,
    crcLength: o.crcLength,
    udpLength: o.udpLength,
    rc4Key: o.rc4Key,
    acceptAnyProtocol: true,
    eventThread: o.eventThread,
  });
  server.on('session', (s) => {
    s.on('message', (data, info) => {
      if (info.kind === 'reliable') s.send(data, info.channel);
      else if (info.kind === 'ordered') s.sendOrdered(data);
      else s.sendUnreliable(data);
    });
  });
  return { port: server.address().port, stop: () => server.close() };
}

function startH1z1(o) {
  const server = new EchoServer(o.port, o.rc4Key ?? Buffer.alloc(0));
  server._serverAddress = o.host;
  if (o.eventThread !== undefined) server.eventThread = o.eventThread;
  server.start(o.crcLength, o.udpLength);
  return { port: server.address().port, stop: () => server.stop() };
}

{ const orig = soe.SoeServer.prototype._onBatch; let calls = 0, events = 0; soe.SoeServer.prototype._onBatch = function (b) { calls++; events += b.meta.length / 8; return orig.call(this, b); }; process.on("exit", () => process.stderr.write(`batches ${calls} events ${events} per batch ${(events / calls).toFixed(2)}\n`)); }
const options = parse(process.argv.slice(2));
let running;
try {
  running = options.api === 'addon' ? startAddon(options) : startH1z1(options);
} catch (e) {
  fail(e.message);
}
let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  try {
    await running.stop();
  } finally {
    process.exit(0);
  }
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
let watchStdin = false;
try {
  const st = fs.fstatSync(0);
  watchStdin = st.isFIFO() || st.isSocket();
} catch {
  // No stdin at all: signals only.
}
if (watchStdin) {
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
process.stdout.write(`listening ${running.port}\n`);
