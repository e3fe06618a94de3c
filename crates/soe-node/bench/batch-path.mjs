// The JS side of the addon's receive-and-reply path, without sockets: synthetic batches of
// messages run through the endpoint's batch handler (`_onBatch`, as the addon calls it), each
// answered by an echo handler as bench/echo-server.mjs writes it, and the replies' queue flushed
// into the addon's `sendBatch` (for sessions it does not have, so it drops them after reading
// them). It prints the JS time per message: what index.js (and h1z1.js with --api h1z1) spends
// routing a message to its handler and queueing the reply, apart from the system calls, the
// protocol and the event loop that the fixed-load measurements include.
//
//   node bench/batch-path.mjs [--api addon|h1z1] [--sessions N] [--batch N] [--rounds N]
//
//   --api       addon (default): a SoeServer whose 'message' handler echoes; h1z1: the facade's
//               SOEServer echoing in 'appdata'
//   --sessions  sessions the batches go to (default 500)
//   --batch     messages per batch, half reliable and half unreliable (default 4)
//   --rounds    measured rounds of 1,000 batches (default 15); the first round only warms up
//
// Output, one line: `batch-path <api>: <median> ns per message (min <min>, <rounds> rounds,
// <sessions> sessions, <batch> per batch); replies handed to the addon <n> of <n>`.
import soe from '../index.js';
import { SOEServer } from '../h1z1.js';

function parse(argv) {
  const o = { api: 'addon', sessions: 500, batch: 4, rounds: 15 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--api' && (value === 'addon' || value === 'h1z1')) o.api = value;
    else if (['--sessions', '--batch', '--rounds'].includes(flag) && /^[1-9]\d*$/.test(value ?? '')) {
      o[flag.slice(2)] = Number(value);
    } else {
      process.stderr.write(`batch-path: bad flag ${flag} ${value ?? ''}\n`);
      process.exit(1);
    }
  }
  return o;
}

const o = parse(process.argv.slice(2));
let server;
let stop;
if (o.api === 'h1z1') {
  class EchoServer extends SOEServer {
    constructor() {
      super(0, Buffer.alloc(0));
      this._allowRawDataReception = true;
      this.on('appdata', (client, data, isRawData) => this.sendAppData(client, data, isRawData ? 'Raw' : 'Reliable'));
    }
  }
  const h1z1 = new EchoServer();
  h1z1._serverAddress = '127.0.0.1';
  h1z1.start();
  server = h1z1._server;
  stop = () => h1z1.stop();
} else {
  server = new soe.SoeServer({ host: '127.0.0.1', port: 0, acceptAnyProtocol: true });
  server.on('session', (s) => {
    s.on('message', (data, info) => {
      if (info.kind === 'reliable') s.send(data, info.channel);
      else s.sendUnreliable(data);
    });
  });
  stop = () => server.close();
}

// Counts the replies handed to the addon (3 numbers each).
let handed = 0;
const native = server._native;
const sendBatch = native.sendBatch.bind(native);
native.sendBatch = (meta, numbers, data, bytes) => {
  handed += numbers / 3;
  return sendBatch(meta, numbers, data, bytes);
};

// A batch as the addon makes it: 8 numbers per event, then the messages' bytes.
const ACCEPTED = 1;
const MESSAGE = 2;
const LENGTH = 40;
const IDS = 1_000_000; // far from the ids of real sessions, which the addon counts from 0
function batch(events) {
  const numbers = events.length * 8;
  const bytes = new ArrayBuffer(numbers * 8 + events.length * LENGTH);
  const meta = new Float64Array(bytes, 0, numbers);
  new Uint8Array(bytes, numbers * 8).fill(7); // an unreliable message may not start with 0
  const texts = [];
  events.forEach(([kind, id, delivery], k) => {
    const i = k * 8;
    meta[i] = kind;
    meta[i + 1] = id;
    meta[i + 3] = delivery;
    if (kind === MESSAGE) {
      meta[i + 4] = k * LENGTH;
      meta[i + 5] = LENGTH;
    } else {
      meta[i + 5] = 480;
      meta[i + 6] = id;
      texts.push(`127.0.0.1:${1024 + (id % 60_000)}`, 'SoeBench');
    }
  });
  return { bytes, count: events.length, texts: texts.length > 0 ? texts : undefined };
}
const run = (b) => {
  const numbers = b.count * 8;
  server._onBatch({ meta: new Float64Array(b.bytes, 0, numbers), data: Buffer.from(b.bytes, numbers * 8), texts: b.texts });
};

const accepted = [];
for (let k = 0; k < o.sessions; k++) accepted.push([ACCEPTED, IDS + k, 0]);
run(batch(accepted));
const batches = [];
let x = 12345;
for (let b = 0; b < 1000; b++) {
  const events = [];
  for (let k = 0; k < o.batch; k++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    events.push([MESSAGE, IDS + (x % o.sessions), k & 1]);
  }
  batches.push(batch(events));
}
const sent = () => 1000 * o.batch;
const times = [];
let delivered = 0;
handed = 0;
for (let r = 0; r <= o.rounds; r++) {
  const t0 = process.hrtime.bigint();
  for (const b of batches) run(b);
  const ns = Number(process.hrtime.bigint() - t0);
  delivered += sent();
  if (r > 0) times.push(ns / sent());
}
times.sort((a, b) => a - b);
const median = times[(times.length - 1) >> 1];
process.stdout.write(
  `batch-path ${o.api}: ${median.toFixed(0)} ns per message (min ${times[0].toFixed(0)}, ${o.rounds} rounds, ` +
    `${o.sessions} sessions, ${o.batch} per batch); replies handed to the addon ${handed} of ${delivered}\n`,
);
await stop();
process.exit(handed === delivered ? 0 : 1);
