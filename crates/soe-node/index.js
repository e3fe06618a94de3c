// soe-node: SOE protocol sessions for Node.js, on the soe Rust stack (crates/soe-node).
//
// SoeServer and SoeClient own an endpoint that runs off the JS thread; SoeSession is one peer.
// Messages are Buffers; connect and listen return Promises; send() returns false and a 'drain'
// event follows when the session's queue is full, as stream.write does; errors are Error
// objects with a `code`. Arguments are checked here, before they reach the addon: a wrong type
// is a TypeError with code ERR_INVALID_ARG_TYPE, a wrong value a RangeError with code
// ERR_INVALID_ARG_VALUE, each naming the argument.
'use strict';

const { EventEmitter } = require('node:events');
const dns = require('node:dns');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { inspect } = require('node:util');

const addon = require('./binding.js').load();
const native = addon.binding;

// Event kinds in a native batch.
const KIND_ACCEPTED = 1;
const KIND_MESSAGE = 2;
const KIND_DISCONNECT = 3;
const KIND_DRAIN = 4;
const KIND_END = 5;
const KIND_CONNECTED = 6;
const KIND_CONNECT_FAILED = 7;
// The kinds of message in a native send batch, beside the reliable channels 0 to 3.
const SEND_UNRELIABLE = 4;
const SEND_ORDERED = 5;
// Unreliable and ordered messages a session queues in the addon, at most (soe-session's
// max_queued_unreliable): a batch is sent before one session has more than that in it.
const DATAGRAM_QUEUE = 256;
// The send queue's reused arrays: (id, kind, length) per message, and the bytes back to back.
// They start this large and grow as a tick needs; grown over four times larger, they go back
// to this size after a flush that used under a quarter of them.
const OUT_NUMBERS = 3 * 256;
const OUT_BYTES = 64 * 1024;
// A message longer than this goes to the addon in a call of its own, from the caller's buffer,
// rather than being copied into the queue.
const OUT_DIRECT = 64 * 1024;
const DELIVERY = ['reliable', 'unreliable', 'ordered'];
// The info object of each kind of message, shared (frozen) by every message of that kind.
// Indexed by channel * 3 + delivery, with integers (a float index makes V8's loads generic).
const INFOS = [0, 1, 2, 3].flatMap((channel) =>
  DELIVERY.map((kind) => Object.freeze({ channel, kind, unreliable: kind !== 'reliable' })),
);
// Lets this module, and only it, construct sessions.
const INTERNAL = Symbol('soe-node internal');
// The header of an ordered message: it fits 4 bytes less than an unreliable one.
const ORDERED_HEADER = 4;

/** SOE disconnect reasons by name, and back. */
const REASONS = Object.freeze({
  none: 0,
  icmpError: 1,
  timeout: 2,
  otherSideTerminated: 3,
  managerDeleted: 4,
  connectFail: 5,
  application: 6,
  unreachableConnection: 7,
  unacknowledgedTimeout: 8,
  newConnectionAttempt: 9,
  connectionRefused: 10,
  connectError: 11,
  connectingToSelf: 12,
  reliableOverflow: 13,
  applicationReleased: 14,
  corruptPacket: 15,
  protocolMismatch: 16,
});
const REASON_NAMES = Object.fromEntries(Object.entries(REASONS).map(([k, v]) => [v, k]));

function reasonName(code) {
  return REASON_NAMES[code] || `reason${code}`;
}

// ----- errors -----

function describe(value) {
  if (value == null) return ` Received ${value}`;
  if (typeof value === 'function') return ` Received function ${value.name || '<anonymous>'}`;
  if (typeof value === 'object') {
    const name = value.constructor && value.constructor.name;
    return name ? ` Received an instance of ${name}` : ` Received ${inspect(value, { depth: -1 })}`;
  }
  let shown = inspect(value, { colors: false });
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`;
  return ` Received type ${typeof value} (${shown})`;
}

/** A TypeError with code ERR_INVALID_ARG_TYPE: `name` must be `expected`. */
function argType(name, expected, value) {
  const err = new TypeError(`The "${name}" argument must be ${expected}.${describe(value)}`);
  err.code = 'ERR_INVALID_ARG_TYPE';
  return err;
}

/** A RangeError with code ERR_INVALID_ARG_VALUE: `name` `must` (be ...). */
function argValue(name, must, value) {
  const shown = typeof value === 'string' ? JSON.stringify(value) : inspect(value, { depth: 0 });
  const err = new RangeError(`The "${name}" argument ${must}. Received ${shown}`);
  err.code = 'ERR_INVALID_ARG_VALUE';
  return err;
}

function coded(code, message) {
  const err = new Error(message);
  err.code = code;
  return err;
}

// Native errors carry their code in front of the message: "ERR_SOE_X: text".
function fromNative(e) {
  if (e && typeof e.message === 'string') {
    const m = /^(ERR_[A-Z0-9_]+): ([\s\S]*)$/.exec(e.message);
    if (m) {
      if (m[1] === 'ERR_INVALID_ARG_VALUE') {
        const err = new RangeError(m[2]);
        err.code = m[1];
        return err;
      }
      return coded(m[1], m[2]);
    }
  }
  return e;
}

function call(fn) {
  try {
    return fn();
  } catch (e) {
    throw fromNative(e);
  }
}

// ----- arguments -----

function toBuffer(data, name = 'data') {
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (typeof data === 'string') return Buffer.from(data);
  throw argType(name, 'of type string or an instance of Buffer or Uint8Array', data);
}

function checkInteger(name, value, min, max) {
  if (typeof value !== 'number') throw argType(name, 'of type number', value);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw argValue(name, `must be an integer from ${min} to ${max}`, value);
  }
  return value;
}

function checkBoolean(name, value) {
  if (typeof value !== 'boolean') throw argType(name, 'of type boolean', value);
  return value;
}

function checkString(name, value) {
  if (typeof value !== 'string') throw argType(name, 'of type string', value);
  return value;
}

const U32 = 0xffff_ffff;
// The numeric options: their name in JS, in the addon, and their range.
const NUMBERS = [
  ['udpLength', 'udpLength', 64, 65_507],
  ['idleTimeout', 'idleTimeoutMs', 0, U32],
  ['connectTimeout', 'connectTimeoutMs', 0, U32],
  ['maxSessions', 'maxSessions', 1, U32],
  ['maxQueuedMessages', 'maxQueuedMessages', 1, U32],
  ['maxMessageSize', 'maxMessageSize', 1, U32 - 1],
  ['receiveQueueBytes', 'receiveQueueBytes', 1, U32],
  ['eventBatchMs', 'eventBatchMs', 0, 1000],
  ['maxOutstandingBytes', 'maxOutstandingBytes', 1, U32],
  ['recordSessionBytes', 'recordSessionBytes', 8192, U32],
  ['recordEndpointBytes', 'recordEndpointBytes', 8192, U32],
];
const PRESETS = ['free-realms', 'osfr-libsoe', 'h1z1', 'planetside2'];
const EVENT_THREADS = ['pump', 'js'];

/** Checks every option (the error names the one that is wrong) and builds the addon's. */
function nativeOptions(server, options, bind) {
  const o = options;
  const out = { server, bind };
  for (const [name, key, min, max] of NUMBERS) {
    if (o[name] !== undefined) out[key] = checkInteger(`options.${name}`, o[name], min, max);
  }
  if (o.protocol !== undefined) {
    checkString('options.protocol', o.protocol);
    if (o.protocol.includes('\0')) throw argValue('options.protocol', 'must not contain a NUL character', o.protocol);
    out.protocol = o.protocol;
  }
  if (o.preset !== undefined) {
    checkString('options.preset', o.preset);
    if (!PRESETS.includes(o.preset)) throw argValue('options.preset', `must be one of ${PRESETS.join(', ')}`, o.preset);
    out.preset = o.preset;
  }
  if (o.eventThread !== undefined) {
    checkString('options.eventThread', o.eventThread);
    if (!EVENT_THREADS.includes(o.eventThread)) throw argValue('options.eventThread', `must be one of ${EVENT_THREADS.join(', ')}`, o.eventThread);
    out.eventThread = o.eventThread;
  }
  if (o.crcLength !== undefined) {
    if (typeof o.crcLength !== 'number') throw argType('options.crcLength', 'of type number', o.crcLength);
    if (![0, 2, 4].includes(o.crcLength)) throw argValue('options.crcLength', 'must be 0, 2 or 4', o.crcLength);
    out.crcLength = o.crcLength;
  }
  if (o.compression !== undefined) out.compression = checkBoolean('options.compression', o.compression);
  if (o.rc4AtStart !== undefined) out.rc4AtStart = checkBoolean('options.rc4AtStart', o.rc4AtStart);
  for (const name of ['acceptAnyProtocol', 'acceptAnyProtocolVersion', 'bundleMessages', 'reusePort', 'limitLoopback', 'recordSessions', 'recordKeys']) {
    if (o[name] !== undefined) out[name] = checkBoolean(`options.${name}`, o[name]);
  }
  if (o.rc4Key !== undefined) {
    const key = toBuffer(o.rc4Key, 'options.rc4Key');
    if (key.length < 1 || key.length > 256) {
      throw argValue('options.rc4Key', 'must be 1 to 256 bytes long', `${key.length} bytes`);
    }
    out.rc4Key = key;
  }
  return out;
}

function checkOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw argType('options', 'of type object', options);
  return options;
}

/**
 * Splits "host:port", "[v6]:port" or { host, port } into [host, port]; `what` names the argument
 * in errors. `defaultHost` fills a missing host of an object.
 */
function hostPort(target, what, defaultHost, minPort) {
  let host;
  let port;
  if (typeof target === 'string') {
    const m = /^\[([^\]]*)\]:(\d+)$/.exec(target) || /^([^:]*):(\d+)$/.exec(target);
    if (!m) throw argValue(what, 'must be "host:port" or "[IPv6]:port"', target);
    host = m[1];
    port = Number(m[2]);
    if (port > 65_535 || port < minPort) throw argValue(what, `must have a port from ${minPort} to 65535`, target);
  } else if (target !== null && typeof target === 'object') {
    host = target.host === undefined ? defaultHost : checkString(`${what}.host`, target.host);
    port = checkInteger(`${what}.port`, target.port, minPort, 65_535);
  } else {
    throw argType(what, 'a "host:port" string or an object { host, port }', target);
  }
  if (host === '') throw argValue(`${what}.host`, 'must not be empty', host);
  return [host, port];
}

function joinHostPort(host, port) {
  return net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The error of a connect to an address of the other family than the client's socket. */
function familyMismatch(target, local) {
  const want = net.isIPv6(target.replace(/^\[|\]:\d+$/g, '')) || target.startsWith('[') ? 'IPv6' : 'IPv4';
  return coded(
    'ERR_SOE_ADDRESS_FAMILY',
    `cannot reach ${target} (${want}) from a client bound to ${joinHostPort(local.address, local.port)} ` +
      `(${local.family}): bind the client to an ${want} address (options.bind, e.g. ` +
      `"${want === 'IPv6' ? '[::]:0' : '0.0.0.0:0'}")`,
  );
}

/** An IP address for `host` without asking DNS: IP literals, and "localhost" as 127.0.0.1. */
function literalHost(host) {
  if (net.isIP(host)) return host;
  if (host.toLowerCase() === 'localhost') return '127.0.0.1';
  return null;
}

/** An IP address for `host` of `family` (4 or 6; 0 either), through dns.lookup for names. */
async function resolveHost(host, family) {
  if (net.isIP(host)) return host;
  const { address } = await dns.promises.lookup(host, { family });
  return address;
}

/** The reason code of `reason` (a name of REASONS or one of their numbers), or the error. */
function reasonCode(reason, name) {
  if (typeof reason === 'string') {
    if (Object.prototype.hasOwnProperty.call(REASONS, reason)) return REASONS[reason];
    throw argValue(name, `must be a reason name (${Object.keys(REASONS).join(', ')}) or its number`, reason);
  }
  if (typeof reason === 'number') {
    if (Number.isInteger(reason) && REASON_NAMES[reason] !== undefined) return reason;
    throw argValue(name, 'must be a reason number from 0 to 16 or its name', reason);
  }
  throw argType(name, 'a reason name (string) or number', reason);
}

// ----- sessions -----

/** One SOE session (a connected peer). Events: 'message', 'drain', 'disconnect'. */
class SoeSession extends EventEmitter {
  constructor(token, endpoint, id, remoteAddress, sessionId, protocol, maxDatagram) {
    if (token !== INTERNAL) {
      const err = new TypeError('Illegal constructor: sessions come from a SoeServer or SoeClient');
      err.code = 'ERR_ILLEGAL_CONSTRUCTOR';
      throw err;
    }
    super();
    this._endpoint = endpoint;
    this.id = id;
    this.remoteAddress = remoteAddress;
    this.sessionId = sessionId;
    this.protocol = protocol;
    this.closed = false;
    this.writableNeedDrain = false;
    this._drainEpoch = -1;
    this._batched = 0;
    this._datagrams = 0;
    // The longest unreliable message that fits one datagram to this peer.
    this._maxDatagram = maxDatagram;
    // Events held until the caller of connect() has its listeners on (null: none held).
    this._early = null;
  }

  _native() {
    if (this.closed) throw coded('ERR_SOE_SESSION_CLOSED', `session ${this.id} is closed`);
    return this._endpoint._native;
  }

  /**
   * Sends a reliable message on `channel` (0 to 3). Returns false when the session's queue is
   * full: the message is kept and goes out in order; wait for 'drain' before writing more.
   */
  send(data, channel = 0) {
    const buf = toBuffer(data);
    if (channel !== 0 && (!Number.isInteger(channel) || channel < 0 || channel > 3)) {
      if (typeof channel !== 'number') throw argType('channel', 'of type number', channel);
      throw argValue('channel', 'must be 0, 1, 2 or 3', channel);
    }
    if (this.closed) this._native(); // throws
    const endpoint = this._endpoint;
    if (buf.length > endpoint._maxMessageSize) {
      throw coded(
        'ERR_SOE_MESSAGE_TOO_LARGE',
        `a message of ${buf.length} bytes exceeds the limit of ${endpoint._maxMessageSize} bytes`,
      );
    }
    // Messages go to the addon in one call per turn of the event loop (or as soon as a
    // session has a queue's worth waiting), which is what lets a JS echo keep up.
    endpoint._queue(this, channel, buf);
    return !this.writableNeedDrain;
  }

  /**
   * Sends an unreliable message: one datagram at most, in any order, at most once. Not empty,
   * and its first byte not 0 (the receiver reads a datagram that starts with 0 as a protocol
   * packet).
   */
  sendUnreliable(data) {
    const buf = this._datagram(data);
    this._native(); // throws when closed
    this._fits(buf, this._maxDatagram, 'an unreliable message');
    this._endpoint._queueDatagram(this, SEND_UNRELIABLE, buf);
  }

  /**
   * Sends an ordered message: unreliable, one datagram with a 4-byte header, never delivered
   * after a newer one (the receiver drops stale ones). Any first byte.
   */
  sendOrdered(data) {
    const buf = toBuffer(data);
    this._native(); // throws when closed
    this._fits(buf, this._maxDatagram - ORDERED_HEADER, 'an ordered message');
    this._endpoint._queueDatagram(this, SEND_ORDERED, buf);
  }

  _fits(buf, max, what) {
    // A session always reports its limit; 0 would mean unknown, and the addon decides.
    if (buf.length > max && max > 0) {
      throw coded(
        'ERR_SOE_MESSAGE_TOO_LARGE',
        `${what} of ${buf.length} bytes does not fit one datagram to this peer (at most ${max} bytes)`,
      );
    }
  }

  _datagram(data) {
    const buf = toBuffer(data);
    if (buf.length === 0) throw argValue('data', 'must not be empty (an unreliable message is one datagram)', '<empty>');
    if (buf[0] === 0) {
      throw argValue(
        'data',
        'must not start with byte 0 (the receiver reads such a datagram as a protocol packet; send it reliably)',
        `<${buf.length} bytes starting 00>`,
      );
    }
    return buf;
  }

  /**
   * Turns RC4 on or off for this session, both directions: messages sent from now on are
   * encrypted (or not), and so are messages that arrive complete from now on. Switch before
   * sending the reply that must be encrypted (see the README).
   */
  setEncryption(on) {
    checkBoolean('on', on);
    if (!this._endpoint._hasKey) throw coded('ERR_SOE_NO_KEY', 'this session has no RC4 key (options.rc4Key)');
    this._native();
    this._endpoint._flush(); // messages sent before the switch go out as they were
    if (!call(() => this._native().setEncryption(this.id, on))) {
      throw coded('ERR_SOE_NO_KEY', 'this session has no RC4 key (options.rc4Key)');
    }
  }

  /**
   * Starts (`on`, default true) or stops recording this session with the flight recorder
   * (stopping forgets what was recorded). Returns false once the session has ended.
   */
  record(on = true) {
    checkBoolean('on', on);
    return call(() => this._native().setRecording(this.id, on));
  }

  /**
   * This session's recording so far as a pcapng capture (Wireshark with the soe.lua plugin,
   * or `soe decode --pcap`, reads it), or null when it is not recorded. It goes on recording,
   * from empty. A session that ends abnormally hands its whole recording to 'disconnect'.
   */
  takeRecording() {
    return call(() => this._native().takeRecording(this.id));
  }

  /**
   * Counters: rtt (ms), resends, loss (packets lost per reliable packet sent: resends the
   * peer's acks did not show unnecessary), pending writes.
   */
  stats() {
    this._endpoint._flush();
    const s = call(() => this._native().stats(this.id));
    return {
      rtt: s.rttMs,
      resends: s.resends,
      lost: s.lost,
      loss: s.reliablePacketsSent > 0 ? s.lost / s.reliablePacketsSent : 0,
      reliablePacketsSent: s.reliablePacketsSent,
      fastResends: s.fastResends,
      spuriousResends: s.spuriousResends,
      duplicates: s.duplicates,
      outOfOrder: s.outOfOrder,
      acksSent: s.acksSent,
      acksReceived: s.acksReceived,
      datagramsSent: s.datagramsSent,
      datagramsReceived: s.datagramsReceived,
      bytesSent: s.bytesSent,
      bytesReceived: s.bytesReceived,
      messagesSent: s.reliableMessagesSent,
      messagesReceived: s.reliableMessagesReceived,
      unreliableSent: s.unreliableSent,
      unreliableReceived: s.unreliableReceived,
      pendingMessages: s.pendingMessages,
      bytesQueued: s.pendingBytes,
      unreliableDropped: s.unreliableDropped,
    };
  }

  /**
   * Closes the session with a reason (a name of REASONS or its number, default
   * 'application'). Resolves with the reason's name once it has ended.
   */
  close(reason = 'application') {
    let code;
    try {
      code = reasonCode(reason, 'reason');
    } catch (e) {
      return Promise.reject(e);
    }
    const ended = this.closed
      ? Promise.resolve(this._reason)
      : new Promise((resolve) => this.once('disconnect', resolve));
    if (!this.closed) {
      this._endpoint._flush(); // what was sent before the close goes first
      try {
        call(() => this._endpoint._native.closeSession(this.id, code));
      } catch (e) {
        // The addon forgot the session first: its 'disconnect' is on its way.
        if (e.code !== 'ERR_SOE_SESSION_CLOSED') return Promise.reject(e);
      }
    }
    return ended;
  }

  _deliver(ev) {
    switch (ev.kind) {
      case KIND_MESSAGE:
        this.emit('message', ev.data, INFOS[ev.channel * 3 + ev.delivery]);
        break;
      case KIND_DRAIN:
        if (ev.reason !== this._drainEpoch) break;
        this.writableNeedDrain = false;
        this.emit('drain');
        break;
      case KIND_DISCONNECT: {
        this.closed = true;
        this._reason = reasonName(ev.reason);
        const info = { code: ev.reason, byPeer: ev.byPeer };
        // The flight recorder's capture of a recorded session that ended abnormally.
        if (ev.data !== undefined) info.recording = ev.data;
        this.emit('disconnect', this._reason, info);
        if (ev.data !== undefined) this._endpoint._recorded(this, ev.data);
        break;
      }
      default:
        break;
    }
  }
}

// ----- endpoints -----

// A native batch: one ArrayBuffer with 8 numbers (float64, little-endian, as every platform
// the addon is built for stores them) per event, then the messages' bytes; `texts` is
// undefined when no event has a string.
function unpack(bytes, count, texts) {
  const numbers = count * 8;
  return { meta: new Float64Array(bytes, 0, numbers), data: Buffer.from(bytes, numbers * 8), texts };
}

class Endpoint extends EventEmitter {
  constructor(server, options, bind) {
    super();
    this._sessions = new Map();
    this._maxMessageSize = options.maxMessageSize ?? 4 * 1024 * 1024;
    this._highWater = options.maxQueuedMessages ?? 4096;
    this._hasKey = options.rc4Key !== undefined;
    // The messages sent since the last flush (see _flush).
    this._outMeta = new Float64Array(OUT_NUMBERS);
    this._outNumbers = 0;
    this._outData = Buffer.allocUnsafe(OUT_BYTES);
    this._outBytes = 0;
    // Batches being run (a batch flushes at its end, instead of in a microtask).
    this._running = 0;
    this._flushScheduled = false;
    this._flushLater = () => this._deferredFlush();
    this._batchedSessions = [];
    // Set by the h1z1 facade: takes every message instead of the session's 'message' event.
    this._onMessage = null;
    // Connects in flight, and whether the endpoint closes with its last session.
    this._connecting = 0;
    this._closeWithLastSession = false;
    this._closing = false;
    this._endedFlag = false;
    // Batches (and the rest of one) held back after a listener threw, to keep their order.
    this._held = [];
    this._heldScheduled = false;
    // The connects in flight by session id: { target, resolve, reject }.
    this._connects = new Map();
    this._ended = new Promise((resolve) => {
      this._resolveEnded = resolve;
    });
    if (options.recordDir !== undefined) checkString('options.recordDir', options.recordDir);
    this._recordDir = options.recordDir;
    const settings = nativeOptions(server, options, bind);
    this._native = call(() => new native.NativeEndpoint(settings, (bytes, count, texts) => this._onBatch(unpack(bytes, count, texts))));
  }

  // A recorded session ended abnormally: with `recordDir`, its capture is written there
  // (asynchronously), then 'recording' (path, session) is emitted; a failed write is an 'error'.
  _recorded(session, capture) {
    if (this._recordDir === undefined) return;
    const host = String(session.remoteAddress).replace(/[^0-9A-Za-z]+/g, '-');
    const file = path.join(this._recordDir, `${Date.now()}-session-${session.id}-${host}.pcapng`);
    fs.promises
      .mkdir(this._recordDir, { recursive: true })
      .then(() => fs.promises.writeFile(file, capture))
      .then(
        () => this.emit('recording', file, session),
        (e) => {
          e.code = e.code || 'ERR_SOE_RECORDING';
          this.emit('error', e);
        },
      );
  }

  // A batch: `meta` has 8 numbers per event (kind, id, channel, delivery, offset, length,
  // reason or session id, byPeer); messages are views into `data`; `texts` holds the remote
  // address and protocol of each accepted session and the error of each failed connect, in
  // order.
  // What the batch's listeners send goes to the addon in one call at its end, or in a microtask
  // if a listener threw.
  _onBatch(batch) {
    this._running++;
    let done = false;
    try {
      if (this._held.length === 0) this._run(batch, 0, 0);
      else {
        this._held.push({ batch, at: 0, text: 0 });
        this._runHeld();
      }
      done = true;
    } finally {
      this._running--;
      if (this._running === 0 && this._outNumbers > 0) {
        if (done) this._deferredFlush();
        else this._flushSoon();
      }
    }
  }

  // Runs the batches held back by a listener that threw, oldest first.
  _runHeld() {
    this._heldScheduled = false;
    while (this._held.length > 0) {
      const { batch, at, text } = this._held.shift();
      this._run(batch, at, text);
    }
  }

  // Runs a batch from event `from`. A listener that throws ends this call, as an uncaught
  // exception does: the rest of the batch is held, ahead of any batch that comes meanwhile, and
  // runs on the next turn of the event loop (or with the next batch, if that comes first).
  _run(batch, from, firstText) {
    const { meta, data, texts } = batch;
    let i = from;
    let text = firstText;
    try {
      for (; i < meta.length; i += 8) {
        const kind = meta[i];
        const id = meta[i + 1];
        if (kind === KIND_MESSAGE) {
          const session = this._sessions.get(id);
          if (session !== undefined && session._early === null) {
            const at = meta[i + 4];
            const message = data.subarray(at, at + meta[i + 5]);
            if (this._onMessage !== null) this._onMessage(session, message, meta[i + 3], meta[i + 2]);
            else session.emit('message', message, INFOS[(meta[i + 2] | 0) * 3 + (meta[i + 3] | 0)]);
            continue;
          }
        }
        if (kind === KIND_ACCEPTED) {
          const remote = texts[text++];
          const protocol = texts[text++];
          const session = new SoeSession(INTERNAL, this, id, remote, meta[i + 6], protocol, meta[i + 5]);
          this._sessions.set(id, session);
          this.emit('session', session);
          continue;
        }
        if (kind === KIND_CONNECTED || kind === KIND_CONNECT_FAILED) {
          const error = kind === KIND_CONNECT_FAILED ? texts[text++] : undefined;
          this._connected(id, meta, i, error);
          continue;
        }
        if (kind === KIND_END) {
          this._end();
          continue;
        }
        this._event(kind, id, meta, i, data);
      }
    } catch (e) {
      if (i + 8 < meta.length) this._held.unshift({ batch, at: i + 8, text });
      if (this._held.length > 0 && !this._heldScheduled) {
        this._heldScheduled = true;
        setImmediate(() => this._runHeld());
      }
      throw e;
    }
  }

  _event(kind, id, meta, i, data) {
    const ev = {
      kind,
      id,
      channel: meta[i + 2],
      delivery: meta[i + 3],
      data: kind === KIND_MESSAGE ? data.subarray(meta[i + 4], meta[i + 4] + meta[i + 5])
        // A disconnect's flight recording (a pcapng capture), copied out of the batch.
        : kind === KIND_DISCONNECT && meta[i + 5] > 0
          ? Buffer.from(data.subarray(meta[i + 4], meta[i + 4] + meta[i + 5]))
          : undefined,
      reason: meta[i + 6],
      byPeer: meta[i + 7] === 1,
    };
    const session = this._sessions.get(id);
    if (session === undefined) return;
    if (session._early !== null) {
      session._early.push(ev);
      return;
    }
    this._deliver(session, ev);
  }

  _deliver(session, ev) {
    if (ev.kind === KIND_DISCONNECT) this._sessions.delete(ev.id);
    try {
      session._deliver(ev);
    } finally {
      if (ev.kind === KIND_DISCONNECT) this._maybeCloseEmpty();
    }
  }

  // A connect's handshake ended: the session resolves its promise, or the error rejects it.
  _connected(id, meta, i, error) {
    const pending = this._connects.get(id);
    if (pending === undefined) return;
    this._connects.delete(id);
    if (error !== undefined) {
      pending.reject(fromNative(new Error(error)));
      return;
    }
    const session = new SoeSession(INTERNAL, this, id, pending.target, meta[i + 6], undefined, meta[i + 5]);
    this._sessions.set(id, session);
    // Its events wait until the caller has its listeners on: the promise resolves in a
    // microtask, after the rest of this batch.
    session._early = [];
    pending.resolve(session);
    const release = () => {
      const early = session._early;
      session._early = null;
      for (let k = 0; k < early.length; k++) {
        try {
          this._deliver(session, early[k]);
        } catch (e) {
          // As in _run: the rest waits for the next turn, ahead of what comes meanwhile.
          session._early = early.slice(k + 1);
          if (session._early.length > 0) setImmediate(release);
          else session._early = null;
          throw e;
        }
      }
    };
    setImmediate(release);
  }

  _end() {
    if (this._endedFlag) return;
    this._endedFlag = true;
    for (const { reject } of this._connects.values()) {
      reject(coded('ERR_SOE_CONNECT', 'the endpoint is closed'));
    }
    this._connects.clear();
    this._native.release();
    this._resolveEnded();
    this.emit('close');
  }

  // A client made by SoeClient.connect ends with its last session.
  _maybeCloseEmpty() {
    if (this._closeWithLastSession && this._sessions.size === 0 && this._connecting === 0 && !this._closing) {
      this.close().catch(() => {});
    }
  }

  _queue(session, channel, buf) {
    if (buf.length > OUT_DIRECT) {
      this._sendAlone(session, channel, buf);
      return;
    }
    this._add(session, channel, buf);
    const n = ++session._batched;
    if (n >= this._highWater) this._flush();
    else this._flushSoon();
  }

  // An unreliable or ordered message: sent with the reliable ones, at the end of the tick (or
  // as soon as the session has a datagram queue's worth waiting).
  _queueDatagram(session, kind, buf) {
    this._add(session, kind, buf);
    const n = ++session._datagrams;
    if (n >= DATAGRAM_QUEUE) this._flush();
    else this._flushSoon();
  }

  // Appends a message to the send queue, its bytes copied (the caller may reuse its buffer).
  _add(session, kind, buf) {
    const at = this._outNumbers;
    const bytes = this._outBytes;
    const length = buf.length;
    if (at + 3 > this._outMeta.length) {
      const meta = new Float64Array(this._outMeta.length * 2);
      meta.set(this._outMeta.subarray(0, at));
      this._outMeta = meta;
    }
    if (bytes + length > this._outData.length) {
      const data = Buffer.allocUnsafe(Math.max(this._outData.length * 2, bytes + length));
      this._outData.copy(data, 0, 0, bytes);
      this._outData = data;
    }
    const meta = this._outMeta;
    meta[at] = session.id;
    meta[at + 1] = kind;
    meta[at + 2] = length;
    this._outNumbers = at + 3;
    this._outData.set(buf, bytes);
    this._outBytes = bytes + length;
    if (session._batched === 0 && session._datagrams === 0) this._batchedSessions.push(session);
  }

  // The end of the tick flushes, unless a batch is running (it flushes at its end).
  _flushSoon() {
    if (!this._flushScheduled && this._running === 0) {
      this._flushScheduled = true;
      queueMicrotask(this._flushLater);
    }
  }

  // A long reliable message: what waits goes first, then this one, from the caller's buffer.
  _sendAlone(session, channel, buf) {
    this._flush();
    this._sendNative(Float64Array.of(session.id, channel, buf.length), 3, buf, buf.length);
  }

  // The flush at the end of the tick: nobody's call to fail, so a failure is an 'error' event.
  _deferredFlush() {
    try {
      this._flush();
    } catch (e) {
      this.emit('error', e);
    }
  }

  _flush() {
    this._flushScheduled = false;
    const numbers = this._outNumbers;
    if (numbers === 0) return;
    const bytes = this._outBytes;
    this._outNumbers = 0;
    this._outBytes = 0;
    const sessions = this._batchedSessions;
    for (let k = 0; k < sessions.length; k++) {
      sessions[k]._batched = 0;
      sessions[k]._datagrams = 0;
    }
    sessions.length = 0;
    const meta = this._outMeta;
    const data = this._outData;
    // A burst's arrays are given back once a flush uses under a quarter of them.
    if (meta.length > 4 * OUT_NUMBERS && numbers < meta.length / 4) this._outMeta = new Float64Array(OUT_NUMBERS);
    if (data.length > 4 * OUT_BYTES && bytes < data.length / 4) this._outData = Buffer.allocUnsafe(OUT_BYTES);
    this._sendNative(meta, numbers, data, bytes);
  }

  // Hands the first `numbers` of `meta` and `bytes` of `data` to the addon, which copies them
  // before it returns. (call() would do the error mapping below, at the cost of a closure per
  // flush on the hot path.)
  _sendNative(meta, numbers, data, bytes) {
    let full;
    try {
      full = this._native.sendBatch(meta, numbers, data, bytes);
    } catch (e) {
      throw fromNative(e);
    }
    // (id, epoch) of each session whose queue is full (null: none): its 'drain' is the one of
    // that epoch (a late drain of an earlier wait, which ended before these messages had to
    // wait, does not count).
    if (full === null) return;
    for (let k = 0; k < full.length; k += 2) {
      const session = this._sessions.get(full[k]);
      if (session) {
        session.writableNeedDrain = true;
        session._drainEpoch = full[k + 1];
      }
    }
  }

  /** Sessions open now, and the datagrams this endpoint sent and received. */
  stats() {
    const [datagramsSent, datagramsReceived] = this._native.datagrams();
    const now = process.hrtime.bigint();
    const last = this._lastStats;
    const seconds = last ? Number(now - last.at) / 1e9 : 0;
    const rate = (value, before) => (seconds > 0 ? (value - before) / seconds : 0);
    this._lastStats = { at: now, datagramsSent, datagramsReceived };
    return {
      sessions: this._native.sessionCount(),
      datagramsSent,
      datagramsReceived,
      // Since the previous stats() call (0 on the first).
      sentPerSecond: last ? rate(datagramsSent, last.datagramsSent) : 0,
      receivedPerSecond: last ? rate(datagramsReceived, last.datagramsReceived) : 0,
    };
  }

  /** The bound address: { address, port, family }. */
  address() {
    const text = this._native.localAddress();
    const at = text.lastIndexOf(':');
    const address = text.slice(0, at).replace(/^\[|\]$/g, '');
    return { address, port: Number(text.slice(at + 1)), family: net.isIPv6(address) ? 'IPv6' : 'IPv4' };
  }

  /**
   * Where the endpoint runs: 'pump' (a thread of its own) or 'js' (this thread's event loop),
   * as options.eventThread asked ('js' by default), or 'pump' where the host lacks what 'js' needs.
   */
  get eventThread() {
    return this._native.eventThread();
  }

  /** Lets the process exit while this endpoint is open, as socket.unref() does. */
  unref() {
    if (!this._endedFlag) this._native.unref();
    return this;
  }

  /** Undoes unref(): the open endpoint keeps the process alive again. */
  ref() {
    if (!this._endedFlag) this._native.ref();
    return this;
  }

  /**
   * Closes every session (with `reason`, default 'managerDeleted') and the endpoint; resolves
   * once done.
   */
  close(reason = 'managerDeleted') {
    let code;
    try {
      code = reasonCode(reason, 'reason');
    } catch (e) {
      return Promise.reject(e);
    }
    if (!this._endedFlag) {
      this._closing = true;
      try {
        this._flush();
      } catch (e) {
        this.emit('error', e);
      }
      this._native.close(code);
    }
    return this._ended;
  }
}

function serverBind(o) {
  const port = o.port === undefined ? 0 : checkInteger('options.port', o.port, 0, 65_535);
  const host = o.host === undefined ? '0.0.0.0' : checkString('options.host', o.host);
  return [host, port];
}

/** An SOE server. Events: 'session' (SoeSession), 'close', 'error'. */
class SoeServer extends Endpoint {
  /**
   * Binds at once: `options.port` (default 0: any) on `options.host` (default 0.0.0.0; an IP
   * address, or "localhost"; SoeServer.listen also resolves other host names).
   */
  constructor(options) {
    const o = checkOptions(options);
    const [host, port] = serverBind(o);
    const ip = literalHost(host);
    if (ip === null) {
      throw argValue('options.host', 'must be an IP address or "localhost" (SoeServer.listen() resolves other names)', host);
    }
    super(true, o, joinHostPort(ip, port));
  }

  /** Creates and binds a server, resolving a host name first: `await SoeServer.listen({ port })`. */
  static async listen(options) {
    const o = checkOptions(options);
    const [host] = serverBind(o);
    if (literalHost(host) !== null) return new SoeServer(o);
    return new SoeServer({ ...o, host: await resolveHost(host, 0) });
  }
}

/** An SOE client endpoint; `connect` opens sessions from it. Events: 'close', 'error'. */
class SoeClient extends Endpoint {
  /** Binds `options.bind` (default "0.0.0.0:0"; "[::]:0" to reach IPv6 servers). */
  constructor(options) {
    const o = checkOptions(options);
    let bind = '0.0.0.0:0';
    if (o.bind !== undefined) {
      const [host, port] = hostPort(checkString('options.bind', o.bind), 'options.bind', '0.0.0.0', 0);
      const ip = literalHost(host);
      if (ip === null) throw argValue('options.bind', 'must be an IP address (or "localhost") and a port', o.bind);
      bind = joinHostPort(ip, port);
    }
    super(false, o, bind);
  }

  /**
   * Opens a session to "host:port" (or { host, port }; host names go through dns.lookup, for an
   * address of the family the client is bound to); resolves with the SoeSession.
   */
  async connect(target) {
    const [host, port] = hostPort(target, 'target', '127.0.0.1', 1);
    const family = this.address().family === 'IPv6' ? 6 : 4;
    if (net.isIP(host) && net.isIP(host) !== family) throw familyMismatch(joinHostPort(host, port), this.address());
    this._connecting += 1;
    try {
      const ip = await resolveHost(host, family);
      const target = joinHostPort(ip, port);
      const id = call(() => this._native.connect(target));
      return await new Promise((resolve, reject) => {
        this._connects.set(id, { target, resolve, reject });
      });
    } finally {
      this._connecting -= 1;
    }
  }

  /**
   * A new client with one session: `await SoeClient.connect('127.0.0.1:20042')`. The client is
   * `session.client`; it closes with its session (or when the connect fails), so nothing is
   * left to close.
   */
  static async connect(target, options) {
    const client = new SoeClient(options);
    client._closeWithLastSession = true;
    let session;
    try {
      session = await client.connect(target);
    } catch (e) {
      await client.close();
      throw e;
    }
    session.client = client;
    return session;
  }
}

module.exports = { SoeServer, SoeClient, SoeSession, REASONS };
