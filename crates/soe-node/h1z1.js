// soe-node/h1z1: h1z1-server's SOEServer surface on the soe Rust stack.
//
// h1z1-server's LoginServer, GatewayServer and ZoneServer2016 are written against its SOEServer
// class: 'appdata' events that carry a client object, sendAppData(client, data, channel),
// setEncryption(client, on), getSoeClient(id).avgPing and so on. This class keeps those names,
// argument types and event order, so that such a server switches by changing one import; the
// protocol work (handshake, CRC, RC4, reliable channels, fragments, resends, acks, timeouts) runs
// in Rust off the JS thread. The package README says member by member what matches, what
// differs and why, and what is not covered.
'use strict';

const { EventEmitter } = require('node:events');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { SoeServer } = require('./index.js');

/** h1z1-server's output channels: the third argument of sendAppData. */
const SOEOutputChannels = Object.freeze({ Reliable: 'Reliable', Raw: 'Raw', Ordered: 'Ordered' });

const INTERNAL = Symbol('soe-node/h1z1 internal');
// The sampling interval of the event loop's delay (ms). Each sample is the time between two
// runs of a timer of this interval, so an idle loop reads the interval itself: the lag is what
// exceeds it.
const LAG_RESOLUTION_MS = 20;
const DELIVERY_RELIABLE = 0;
const DELIVERY_UNRELIABLE = 1;

function argType(name, expected, value) {
  const err = new TypeError(`The "${name}" argument must be ${expected}. Received ${value === null ? 'null' : typeof value}`);
  err.code = 'ERR_INVALID_ARG_TYPE';
  return err;
}

/** The address and port of "a.b.c.d:port" or "[v6]:port", IPv4-mapped IPv6 told as IPv4. */
function splitRemote(text) {
  const at = text.lastIndexOf(':');
  let address = text.slice(0, at).replace(/^\[|\]$/g, '');
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) address = mapped[1];
  return { address, port: Number(text.slice(at + 1)), family: address.includes(':') ? 'IPv6' : 'IPv4' };
}

/** What the servers read of a client's output stream: whether its sends are backed up. */
class SOEOutputStream {
  constructor(client) {
    this._client = client;
  }

  /**
   * Whether this client's reliable data is backed up: the session's send queue is full and
   * sendAppData is keeping messages until it drains. (h1z1-server: 300 packets sent and not yet
   * acknowledged, 100 on loopback.)
   */
  isFlooded() {
    return this._client._session.writableNeedDrain;
  }

  /** Whether this client's data is encrypted now. */
  isUsingEncryption() {
    return this._client._encrypting;
  }
}

/** One client of an SOEServer, as the server's events and getSoeClient hand it out. */
class SOEClient {
  constructor(token, session, server) {
    if (token !== INTERNAL) {
      const err = new TypeError('Illegal constructor: clients come from an SOEServer');
      err.code = 'ERR_ILLEGAL_CONSTRUCTOR';
      throw err;
    }
    const remote = splitRemote(session.remoteAddress);
    /** "address:port", the key of getSoeClient. */
    this.soeClientId = `${remote.address}:${remote.port}`;
    /** The SOE session id the client chose. */
    this.sessionId = session.sessionId;
    this.address = remote.address;
    this.port = remote.port;
    this.family = remote.family;
    /** The application protocol the client asked for (LoginUdp_9, LoginUdp_11, ...). */
    this.protocolName = session.protocol;
    this.crcLength = server._crcLength;
    this.serverUdpLength = server._udpLength;
    /** Set by deleteClient, and when the session ended. */
    this.isDeleted = false;
    this.outputStream = new SOEOutputStream(this);
    this._session = session;
    this._encrypting = server._startedEncrypted;
    this._lastPing = 0;
    /** Addition: the flight recorder's capture of a client that ended abnormally. */
    this.recording = undefined;
  }

  /** The smoothed round trip to this client in ms (0 before the first sample). */
  get avgPing() {
    if (!this._session.closed) this._lastPing = Math.round(this._session.stats().rtt);
    return this._lastPing;
  }

  /** Whether this client's data is encrypted now. */
  get useEncryption() {
    return this._encrypting;
  }

  /** Lines for a /netstats command: loss and out-of-order rates, and the average ping. */
  getNetworkStats() {
    let loss = 0;
    let outOfOrder = 0;
    if (!this._session.closed) {
      const s = this._session.stats();
      if (s.reliablePacketsSent > 0) loss = Number((s.lost / s.reliablePacketsSent).toFixed(3)) * 100;
      if (s.datagramsSent > 0) outOfOrder = Number((s.outOfOrder / s.datagramsSent).toFixed(3)) * 100;
    }
    return [`Packet loss rate ${loss}%`, `Packet outOfOrder rate ${outOfOrder}%`, `Avg ping ${this.avgPing}ms`];
  }
}

/**
 * h1z1-server's SOEServer: `new SOEServer(port, cryptoKey)`, set `_useEncryption` and
 * `keepAliveTimeoutTime`, listen to 'connect', 'appdata' and 'disconnect', then `start()`.
 */
class SOEServer extends EventEmitter {
  constructor(serverPort, cryptoKey) {
    super();
    this._serverPort = serverPort;
    this._serverAddress = process.env.SERVER_BIND_ADDRESS || '0.0.0.0';
    this._cryptoKey = cryptoKey;
    this._udpLength = 512;
    this._crcLength = 2;
    /** Whether sessions start encrypted (read by start()); the gateway sets it false. */
    this._useEncryption = true;
    /** A client silent this long (ms) is disconnected; 0 never. Read by start(). */
    this.keepAliveTimeoutTime = 40_000;
    /** Accepted for compatibility; the Rust stack times its acks and packing itself. */
    this._waitTimeMs = 24;
    /** Whether unreliable datagrams from clients reach 'appdata' (with isRawData true). */
    this._allowRawDataReception = false;
    this.avgEventLoopLag = 0;
    this.currentEventLoopLag = 0;
    this._clients = new Map();
    this._server = null;
    this._stopping = false;
    this._lag = null;
    this._startedEncrypted = true;
    /** Whether start() packs small messages into one packet as a Group (see the README). */
    this.bundleMessages = true;
    /** Whether start() shares the port with other servers that set it (SO_REUSEPORT). */
    this.reusePort = false;
    /** Whether start() applies the per-IP limits to loopback clients too (tests; see the README). */
    this.limitLoopback = false;
    /**
     * Addition (not in h1z1-server): a known client's settings for start(), under the ones it
     * sets itself: 'free-realms', 'osfr-libsoe', 'h1z1', 'planetside2' (docs/interop.md).
     */
    this.preset = undefined;
    /**
     * Addition (not in h1z1-server): the flight recorder, read by start(). `recordSessions`
     * records every client; a client that ends abnormally (a timeout, a corrupt packet...) then
     * has `client.recording`, a pcapng capture, when 'disconnect' is emitted, and with
     * `recordDir` it is also written there ('recording' (path, client) follows).
     */
    this.recordSessions = false;
    this.recordDir = undefined;
    this._onMessage = (session, view, delivery) => {
      const client = session._h1z1;
      if (client.isDeleted) return;
      const raw = delivery === DELIVERY_UNRELIABLE;
      if (delivery !== DELIVERY_RELIABLE && !(raw && this._allowRawDataReception)) return;
      // The addon hands a view into its whole batch; servers keep messages as their own
      // Buffers, so each gets a copy with memory of its own (not a slice of Node's pool).
      const data = Buffer.allocUnsafeSlow(view.length);
      data.set(view);
      if (raw) this.emit('appdata', client, data, true);
      else this.emit('appdata', client, data);
    };
  }

  /**
   * Binds the port given to the constructor (on SERVER_BIND_ADDRESS, default 0.0.0.0) and starts
   * accepting clients, announcing `crcLength` (0, 2 or 4; default 2) and `udpLength` (default
   * 512).
   */
  start(crcLength, udpLength) {
    if (this._server !== null) return;
    if (crcLength !== undefined) this._crcLength = crcLength;
    if (udpLength !== undefined) this._udpLength = udpLength;
    const key = this._cryptoKey === undefined || this._cryptoKey === null || this._cryptoKey.length === 0 ? undefined : this._cryptoKey;
    this._startedEncrypted = key !== undefined && Boolean(this._useEncryption);
    const server = new SoeServer({
      host: this._serverAddress,
      port: this._serverPort,
      crcLength: this._crcLength,
      udpLength: this._udpLength,
      rc4Key: key,
      rc4AtStart: this._startedEncrypted,
      idleTimeout: this.keepAliveTimeoutTime || 0,
      acceptAnyProtocol: true,
      acceptAnyProtocolVersion: true,
      bundleMessages: Boolean(this.bundleMessages),
      reusePort: Boolean(this.reusePort),
      limitLoopback: Boolean(this.limitLoopback),
      ...(this.preset === undefined ? {} : { preset: this.preset }),
      ...(this.eventThread === undefined ? {} : { eventThread: this.eventThread }),
      recordSessions: Boolean(this.recordSessions),
      ...(this.recordDir === undefined ? {} : { recordDir: this.recordDir }),
    });
    server.on('recording', (file, session) => this.emit('recording', file, session._h1z1));
    server._onMessage = this._onMessage;
    server.on('session', (session) => this._accept(session));
    server.on('error', (e) => this.emit('error', e));
    this._server = server;
    this._stopping = false;
    this._lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
    this._lag.enable();
  }

  _accept(session) {
    const client = new SOEClient(INTERNAL, session, this);
    session._h1z1 = client;
    this._clients.set(client.soeClientId, client);
    session.on('disconnect', (reason, info) => {
      if (client.isDeleted || this._stopping) return;
      client.isDeleted = true;
      // Addition: the flight recorder's capture of a client that ended abnormally.
      if (info.recording !== undefined) client.recording = info.recording;
      if (this._clients.get(client.soeClientId) === client) this._clients.delete(client.soeClientId);
      this.emit('disconnect', client);
    });
    this.emit('connect', client);
  }

  /** Closes every session (each client hears a Disconnect) and the port. */
  async stop() {
    if (this._server === null) return;
    const server = this._server;
    this._stopping = true;
    if (this._lag !== null) this._lag.disable();
    await server.close('managerDeleted');
    this._clients.clear();
    this._server = null;
  }

  /** The bound address: { address, port, family } (h1z1-server has no such method). */
  address() {
    if (this._server === null) {
      const err = new Error('the server is not started');
      err.code = 'ERR_SERVER_NOT_RUNNING';
      throw err;
    }
    return this._server.address();
  }

  /** The client whose id ("address:port") is `soeClientId`, if it is connected. */
  getSoeClient(soeClientId) {
    return this._clients.get(soeClientId);
  }

  /** Lines for a /netstats command: the event loop's average lag. */
  getNetworkStats() {
    if (this._lag !== null && this._lag.count > 0) {
      this.currentEventLoopLag = Math.max(0, this._lag.max / 1e6 - LAG_RESOLUTION_MS);
      this.avgEventLoopLag = Math.max(0, this._lag.mean / 1e6 - LAG_RESOLUTION_MS);
      this._lag.reset();
    }
    return [`Avg Server lag : ${Number(this.avgEventLoopLag.toFixed(1))}ms`];
  }

  /**
   * Sends `data` to `client` on `channel`: 'Reliable' (the default), 'Ordered' (unreliable, in
   * order, stale ones dropped; reliable while the client's data is encrypted, or when it does
   * not fit one datagram), or 'Raw' (one unreliable datagram, not encrypted, first byte not 0).
   * Sends to a deleted or disconnected client are dropped, as h1z1-server drops them.
   */
  sendAppData(client, data, channel = SOEOutputChannels.Reliable) {
    if (!(client instanceof SOEClient)) throw argType('client', 'an SOEClient', client);
    const session = client._session;
    if (client.isDeleted || session.closed) return;
    if (channel === SOEOutputChannels.Reliable) {
      session.send(data, 0);
    } else if (channel === SOEOutputChannels.Ordered) {
      if (client._encrypting) {
        session.send(data, 0);
        return;
      }
      try {
        session.sendOrdered(data);
      } catch (e) {
        if (e.code !== 'ERR_SOE_MESSAGE_TOO_LARGE') throw e;
        session.send(data, 0);
      }
    } else if (channel === SOEOutputChannels.Raw) {
      session.sendUnreliable(data);
    } else {
      const err = new RangeError(`The "channel" argument must be 'Reliable', 'Ordered' or 'Raw'. Received ${String(channel)}`);
      err.code = 'ERR_INVALID_ARG_VALUE';
      throw err;
    }
  }

  /** Sends reliable `data` to `client` now, without waiting for the end of the tick. */
  sendUnbufferedAppData(client, data) {
    this.sendAppData(client, data, SOEOutputChannels.Reliable);
    if (this._server !== null) this._server._flush();
  }

  /**
   * Turns RC4 on or off for `client`, both directions, from the next message sent and the next
   * message completed: call it before sending the reply that must be encrypted.
   */
  setEncryption(client, value) {
    if (!(client instanceof SOEClient)) throw argType('client', 'an SOEClient', client);
    const on = Boolean(value);
    if (client.isDeleted || client._session.closed) return;
    client._session.setEncryption(on);
    client._encrypting = on;
  }

  /** Switches RC4 for `client` to the other state. */
  toggleEncryption(client) {
    if (!(client instanceof SOEClient)) throw argType('client', 'an SOEClient', client);
    this.setEncryption(client, !client._encrypting);
  }

  /**
   * Forgets `client`: getSoeClient no longer finds it, nothing more is sent to it or reported
   * from it, and its session closes (what was sent before goes out first; then the client hears
   * a Disconnect with reason 'application'). No 'disconnect' event follows.
   */
  deleteClient(client) {
    if (!(client instanceof SOEClient)) throw argType('client', 'an SOEClient', client);
    if (client.isDeleted) return;
    client.isDeleted = true;
    if (this._clients.get(client.soeClientId) === client) this._clients.delete(client.soeClientId);
    client._session.close('application').catch(() => {});
  }
}

module.exports = { SOEServer, SOEClient, SOEOutputStream, SOEOutputChannels };
