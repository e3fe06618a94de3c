// soe-node: SOE protocol sessions for Node.js, on the soe Rust stack (crates/soe-node).
//
// SoeServer and SoeClient own an endpoint that runs off the JS thread; SoeSession is one peer.
// Messages are Buffers; connect and listen return Promises; send() returns false and a 'drain'
// event follows when the session's queue is full, as stream.write does; errors are Error
// objects with a `code`.
'use strict';

const { EventEmitter } = require('node:events');
const path = require('node:path');
const fs = require('node:fs');

function loadAddon() {
  const candidates = [
    process.env.SOE_NODE_ADDON,
    path.join(__dirname, 'soe_node.node'),
  ].filter(Boolean);
  for (const file of candidates) {
    if (fs.existsSync(file)) {
      return require(file);
    }
  }
  const err = new Error(
    'soe-node: the native addon is not built: run `npm run build` (cargo build -p soe-node) first',
  );
  err.code = 'ERR_SOE_NO_ADDON';
  throw err;
}

const native = loadAddon();

// Event kinds in a native batch.
const KIND_ACCEPTED = 1;
const KIND_MESSAGE = 2;
const KIND_DISCONNECT = 3;
const KIND_DRAIN = 4;
const KIND_END = 5;
const DELIVERY = ['reliable', 'unreliable', 'ordered'];
// The info object of each kind of message, shared (read-only) by every message of that kind.
const INFOS = [0, 1, 2, 3].map((channel) =>
  DELIVERY.map((kind) => Object.freeze({ channel, kind, unreliable: kind !== 'reliable' })),
);

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

// Native errors carry their code in front of the message: "ERR_SOE_X: text".
function rethrow(e) {
  if (e && typeof e.message === 'string') {
    const m = /^(ERR_[A-Z_]+): ([\s\S]*)$/.exec(e.message);
    if (m) {
      const err = new Error(m[2]);
      err.code = m[1];
      throw err;
    }
  }
  throw e;
}

function call(fn) {
  try {
    return fn();
  } catch (e) {
    return rethrow(e);
  }
}

function typeError(what, expected, value) {
  const err = new TypeError(`The "${what}" argument must be ${expected}. Received ${typeof value}`);
  err.code = 'ERR_INVALID_ARG_TYPE';
  return err;
}

function toBuffer(data, what = 'data') {
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (typeof data === 'string') return Buffer.from(data);
  throw typeError(what, 'a Buffer, Uint8Array or string', data);
}

function nativeOptions(server, options, bind) {
  if (options != null && typeof options !== 'object') {
    throw typeError('options', 'an object', options);
  }
  const o = options || {};
  const num = (name) => {
    const v = o[name];
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || v < 0) {
      const err = new RangeError(`options.${name} must be a non-negative integer. Received ${v}`);
      err.code = 'ERR_OUT_OF_RANGE';
      throw err;
    }
    return v;
  };
  return {
    server,
    bind,
    protocol: o.protocol,
    udpLength: num('udpLength'),
    crcLength: num('crcLength'),
    compression: o.compression,
    rc4Key: o.rc4Key === undefined ? undefined : toBuffer(o.rc4Key, 'options.rc4Key'),
    rc4AtStart: o.rc4AtStart,
    idleTimeoutMs: num('idleTimeout'),
    connectTimeoutMs: num('connectTimeout'),
    maxSessions: num('maxSessions'),
    maxQueuedMessages: num('maxQueuedMessages'),
    maxMessageSize: num('maxMessageSize'),
    receiveQueueBytes: num('receiveQueueBytes'),
  };
}

/** One SOE session (a connected peer). Events: 'message', 'drain', 'disconnect'. */
class SoeSession extends EventEmitter {
  constructor(endpoint, id, remoteAddress) {
    super();
    this._endpoint = endpoint;
    this.id = id;
    this.remoteAddress = remoteAddress;
    this.closed = false;
    this.writableNeedDrain = false;
    this._batched = 0;
  }

  _native() {
    if (this.closed) {
      const err = new Error(`session ${this.id} is closed`);
      err.code = 'ERR_SOE_SESSION_CLOSED';
      throw err;
    }
    return this._endpoint._native;
  }

  /**
   * Sends a reliable message on `channel` (0 to 3). Returns false when the session's queue is
   * full: the message is kept and goes out in order; wait for 'drain' before writing more.
   */
  send(data, channel = 0) {
    const buf = toBuffer(data);
    if (!Number.isInteger(channel) || channel < 0 || channel > 3) {
      const err = new RangeError(`channel must be 0 to 3. Received ${channel}`);
      err.code = 'ERR_OUT_OF_RANGE';
      throw err;
    }
    this._native(); // throws when closed
    const endpoint = this._endpoint;
    if (buf.length > endpoint._maxMessageSize) {
      const err = new Error(
        `a message of ${buf.length} bytes exceeds the limit of ${endpoint._maxMessageSize} bytes`,
      );
      err.code = 'ERR_SOE_MESSAGE_TOO_LARGE';
      throw err;
    }
    // Messages go to the addon in one call per turn of the event loop (or as soon as a
    // session has a queue's worth waiting), which is what lets a JS echo keep up.
    endpoint._queue(this, channel, buf);
    return !this.writableNeedDrain;
  }

  /** Sends an unreliable message: one datagram at most, not empty, first byte not 0. */
  sendUnreliable(data) {
    const buf = toBuffer(data);
    call(() => this._native().sendUnreliable(this.id, buf));
  }

  /** Turns RC4 on or off for this session from now on (the H1Z1 gateway's login switch). */
  setEncryption(on) {
    if (typeof on !== 'boolean') throw typeError('on', 'of type boolean', on);
    this._endpoint._flush(); // messages sent before the switch go out as they were
    const switched = call(() => this._native().setEncryption(this.id, on));
    if (!switched) {
      const err = new Error('this session has no RC4 key (options.rc4Key)');
      err.code = 'ERR_SOE_NO_KEY';
      throw err;
    }
  }

  /** Counters: rtt (ms), resends, loss (resends per reliable packet), pending writes. */
  stats() {
    this._endpoint._flush();
    const s = call(() => this._native().stats(this.id));
    return {
      rtt: s.rttMs,
      resends: s.resends,
      loss: s.reliablePacketsSent > 0 ? s.resends / s.reliablePacketsSent : 0,
      reliablePacketsSent: s.reliablePacketsSent,
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
    };
  }

  /**
   * Closes the session with a reason (a name of REASONS, default 'application'). Resolves
   * with the reason once it has ended.
   */
  close(reason = 'application') {
    const code = typeof reason === 'number' ? reason : REASONS[reason];
    if (code === undefined) {
      const err = new TypeError(`unknown disconnect reason ${String(reason)}`);
      err.code = 'ERR_INVALID_ARG_VALUE';
      throw err;
    }
    const ended = this.closed
      ? Promise.resolve(this._reason)
      : new Promise((resolve) => this.once('disconnect', resolve));
    if (!this.closed) {
      this._endpoint._flush(); // what was sent before the close goes first
      call(() => this._endpoint._native.closeSession(this.id, code));
    }
    return ended;
  }

  _deliver(ev) {
    switch (ev.kind) {
      case KIND_MESSAGE:
        this.emit('message', ev.data, INFOS[ev.channel][ev.delivery]);
        break;
      case KIND_DRAIN:
        this.writableNeedDrain = false;
        this.emit('drain');
        break;
      case KIND_DISCONNECT:
        this.closed = true;
        this._reason = reasonName(ev.reason);
        this.emit('disconnect', this._reason, { code: ev.reason, byPeer: ev.byPeer });
        break;
      default:
        break;
    }
  }
}

class Endpoint extends EventEmitter {
  constructor(server, options, bind) {
    super();
    this._sessions = new Map();
    const o = options || {};
    this._maxMessageSize = o.maxMessageSize ?? 4 * 1024 * 1024;
    this._highWater = Math.max(1, o.maxQueuedMessages ?? 4096);
    this._outMeta = [];
    this._outData = [];
    this._flushScheduled = false;
    this._batchedSessions = [];
    // Events of a session opened by connect() that came before its callback.
    this._early = new Map();
    this._ended = new Promise((resolve) => {
      this._resolveEnded = resolve;
    });
    this._native = call(
      () => new native.NativeEndpoint(nativeOptions(server, options, bind), (batch) => this._onBatch(batch)),
    );
  }

  // A batch: `meta` has 8 numbers per event (kind, id, channel, delivery, offset, length,
  // reason, byPeer); messages are views into `data`; `remotes` the accepted sessions' addresses.
  _onBatch({ meta, data, remotes }) {
    let remote = 0;
    for (let i = 0; i < meta.length; i += 8) {
      const kind = meta[i];
      const id = meta[i + 1];
      if (kind === KIND_END) {
        this._resolveEnded();
        this.emit('close');
        continue;
      }
      if (kind === KIND_ACCEPTED) {
        const session = new SoeSession(this, id, remotes[remote++]);
        this._sessions.set(id, session);
        this.emit('session', session);
        continue;
      }
      const session = this._sessions.get(id);
      if (session && kind === KIND_MESSAGE) {
        const at = meta[i + 4];
        session.emit('message', data.subarray(at, at + meta[i + 5]), INFOS[meta[i + 2]][meta[i + 3]]);
        continue;
      }
      const ev = {
        kind,
        id,
        channel: meta[i + 2],
        delivery: meta[i + 3],
        data: kind === KIND_MESSAGE ? data.subarray(meta[i + 4], meta[i + 4] + meta[i + 5]) : undefined,
        reason: meta[i + 6],
        byPeer: meta[i + 7] === 1,
      };
      if (!session) {
        if (!this._early.has(id)) this._early.set(id, []);
        this._early.get(id).push(ev);
        continue;
      }
      if (kind === KIND_DISCONNECT) this._sessions.delete(id);
      session._deliver(ev);
    }
  }

  _queue(session, channel, buf) {
    this._outMeta.push(session.id, channel, buf.length);
    this._outData.push(buf);
    if (session._batched === 0) this._batchedSessions.push(session);
    const n = ++session._batched;
    if (n >= this._highWater) {
      this._flush();
    } else if (!this._flushScheduled) {
      this._flushScheduled = true;
      queueMicrotask(() => this._flush());
    }
  }

  _flush() {
    this._flushScheduled = false;
    if (this._outMeta.length === 0) return;
    const meta = Float64Array.from(this._outMeta);
    const data = this._outData.length === 1 ? this._outData[0] : Buffer.concat(this._outData);
    this._outMeta = [];
    this._outData = [];
    for (const s of this._batchedSessions) s._batched = 0;
    this._batchedSessions = [];
    const full = call(() => this._native.sendBatch(meta, data));
    for (const id of full) {
      const session = this._sessions.get(id);
      if (session) session.writableNeedDrain = true;
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

  /** The bound address: { address, port }. */
  address() {
    const text = this._native.localAddress();
    const at = text.lastIndexOf(':');
    return { address: text.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(text.slice(at + 1)) };
  }

  /** Closes every session (reason managerDeleted) and the endpoint; resolves when done. */
  close(reason = 'managerDeleted') {
    const code = typeof reason === 'number' ? reason : REASONS[reason] ?? 4;
    this._flush();
    this._native.close(code);
    return this._ended;
  }
}

/** An SOE server. Events: 'session' (SoeSession), 'close'. */
class SoeServer extends Endpoint {
  /** Binds at once; `options.port` (default 0: any) and `options.host` (default 0.0.0.0). */
  constructor(options = {}) {
    const port = options.port ?? 0;
    const host = options.host ?? '0.0.0.0';
    super(true, options, `${host.includes(':') ? `[${host}]` : host}:${port}`);
  }

  /** Creates and binds a server: `await SoeServer.listen({ port: 20042 })`. */
  static async listen(options = {}) {
    return new SoeServer(options);
  }
}

/** An SOE client endpoint; `connect` opens sessions from it. */
class SoeClient extends Endpoint {
  constructor(options = {}) {
    super(false, options, options.bind ?? '0.0.0.0:0');
  }

  /** Opens a session to `host:port` (or `{ host, port }`); resolves with the SoeSession. */
  connect(target) {
    let text = target;
    if (target && typeof target === 'object') {
      text = `${target.host ?? '127.0.0.1'}:${target.port}`;
    }
    if (typeof text !== 'string') {
      return Promise.reject(typeError('target', 'a "host:port" string or { host, port }', target));
    }
    return new Promise((resolve, reject) => {
      try {
        this._native.connect(text, (err, id) => {
          if (err) {
            const m = /^(ERR_[A-Z_]+): ([\s\S]*)$/.exec(err);
            const e = new Error(m ? m[2] : err);
            e.code = m ? m[1] : 'ERR_SOE_CONNECT';
            reject(e);
            return;
          }
          const session = new SoeSession(this, id, text);
          this._sessions.set(id, session);
          resolve(session);
          // Events that came before the callback, once the caller has attached its listeners.
          const early = this._early.get(id);
          if (early) {
            this._early.delete(id);
            setImmediate(() => {
              for (const ev of early) {
                if (ev.kind === KIND_DISCONNECT) this._sessions.delete(ev.id);
                session._deliver(ev);
              }
            });
          }
        });
      } catch (e) {
        try {
          rethrow(e);
        } catch (coded) {
          reject(coded);
        }
      }
    });
  }

  /** Creates a client and opens one session: `await SoeClient.connect('127.0.0.1:20042')`. */
  static async connect(target, options = {}) {
    const client = new SoeClient(options);
    const session = await client.connect(target);
    session.client = client;
    return session;
  }
}

module.exports = { SoeServer, SoeClient, SoeSession, REASONS };
