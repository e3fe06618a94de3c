// Type declarations of soe-node (checked against index.js by test/soe.test.mjs, and compiled
// with tsc --strict by test/types.test.mjs). They use Node's types: TypeScript users install
// @types/node (a peer dependency).
/// <reference types="node" />
import { EventEmitter } from 'node:events';

/** SOE disconnect reasons, by name. */
export declare const REASONS: Readonly<{
  none: 0;
  icmpError: 1;
  timeout: 2;
  otherSideTerminated: 3;
  managerDeleted: 4;
  connectFail: 5;
  application: 6;
  unreachableConnection: 7;
  unacknowledgedTimeout: 8;
  newConnectionAttempt: 9;
  connectionRefused: 10;
  connectError: 11;
  connectingToSelf: 12;
  reliableOverflow: 13;
  applicationReleased: 14;
  corruptPacket: 15;
  protocolMismatch: 16;
}>;

export type ReasonName = keyof typeof REASONS;
/** A reason's name, or its number (0 to 16). */
export type Reason = ReasonName | (typeof REASONS)[ReasonName];

/** Settings of an endpoint and its sessions. Durations in milliseconds. */
export interface SoeOptions {
  /** The application protocol name (both sides must agree). Default "SoeEcho". */
  protocol?: string;
  /**
   * A server accepts any application protocol name, as h1z1-server does; each session's
   * `protocol` says which one its client asked for. Default false.
   */
  acceptAnyProtocol?: boolean;
  /**
   * A server accepts a SessionRequest whatever SOE protocol version it carries, as h1z1-server
   * does (its echo benchmark client sends 0); the session runs SOE v3. Default false: a
   * version other than 3 is refused with 'protocolMismatch'.
   */
  acceptAnyProtocolVersion?: boolean;
  /**
   * Small reliable messages sent together are packed into one reliable packet as a Group (one
   * sequence, one ack), as the original library does. false sends one message per packet, as
   * h1z1-server does (tools that count packets then count messages). Default true.
   */
  bundleMessages?: boolean;
  /**
   * A known peer's settings, under the other options (docs/interop.md gives their sources):
   * 'free-realms' (at most 64 KiB in flight), 'osfr-libsoe' (a client takes LibSOE's bare
   * Heartbeat and CRC-less Disconnect), 'h1z1' (its gateway's protocol name, plaintext until
   * setEncryption, 50 ms ack hold), 'planetside2' (acks held up to 500 ms). Default none.
   */
  preset?: 'free-realms' | 'osfr-libsoe' | 'h1z1' | 'planetside2';
  /** The most bytes in flight per reliable channel. Default 204800 (200 KiB). */
  maxOutstandingBytes?: number;
  /**
   * The flight recorder records every session: its last datagrams each way and its messages.
   * A session that ends abnormally hands its recording (a pcapng capture) to 'disconnect'
   * (`info.recording`). Default false (`session.record()` records one).
   */
  recordSessions?: boolean;
  /** The most bytes one session's recording holds, 8192 to 4294967295. Default 65536. */
  recordSessionBytes?: number;
  /** The most bytes the endpoint's recordings hold together. Default 67108864. */
  recordEndpointBytes?: number;
  /** Recordings hold the RC4 key (so their reader can decrypt). Default false: never. */
  recordKeys?: boolean;
  /** Each recording of a session that ended abnormally is also written here ('recording' follows). */
  recordDir?: string;
  /** The largest datagram announced and sent, 64 to 65507. Default 512. */
  udpLength?: number;
  /** The CRC trailer a server announces: 0, 2 or 4. Default 2. */
  crcLength?: 0 | 2 | 4;
  /** Whether a server announces compression. Default false. */
  compression?: boolean;
  /** The RC4 key for reliable data (1 to 256 bytes). Default none. */
  rc4Key?: Buffer | Uint8Array | string;
  /** With a key: encrypt from the start (default true), or start in plaintext until setEncryption(true). */
  rc4AtStart?: boolean;
  /** A session whose peer is silent this long ends with reason 'timeout'; 0: never. Default 30000. */
  idleTimeout?: number;
  /** How long a client waits for the server's answer. Default 10000. */
  connectTimeout?: number;
  /** The most sessions. Default 10000. */
  maxSessions?: number;
  /** Reliable messages queued per channel before send() returns false. Default 4096. */
  maxQueuedMessages?: number;
  /** The longest reliable message in bytes. Default 4 MiB. */
  maxMessageSize?: number;
  /**
   * Bytes of received messages one session may hold while JS is busy (acks go on meanwhile);
   * past it the session closes with 'reliableOverflow'. Default 8 MiB.
   */
  receiveQueueBytes?: number;
  /**
   * While events keep coming, they are handed to JS at most once per this many milliseconds,
   * in one batch (0: each as soon as it is ready). A call into JS costs far more than a
   * message, so at a game server's load this takes most of the JS thread's per-message cost
   * away: an event waits at most until eventBatchMs after the previous hand-over (a millisecond
   * by default); the first event after a quiet millisecond goes at once. Default 1.
   */
  eventBatchMs?: number;
  /**
   * Where the endpoint runs. 'js' (default): the JS thread's own event loop (libuv), as a
   * dgram socket does, with no hand-over between threads (about half the CPU per message of
   * the pump); while the JS thread is held (a long handler, a slow reader), a guard thread
   * drives the endpoint in its place within 10 to 20 ms, so acks, resends and heartbeats go on
   * and messages wait in the receive queue (receiveQueueBytes). 'pump': a thread of its own,
   * so acks and resends never wait for JS at all. Where the host lacks what 'js' needs
   * (libuv's functions), the pump runs instead: `eventThread` on the endpoint says which.
   */
  eventThread?: 'pump' | 'js';
}

export interface ServerOptions extends SoeOptions {
  /** Default 0: any free port. */
  port?: number;
  /**
   * Share the port with other servers that set it too (`SO_REUSEPORT`; Unix only, an error
   * elsewhere): the kernel spreads clients over them by address and port. The servers of one
   * process on one address share one secret and one set of per-source limits; servers in other
   * processes have their own. A client whose NAT gives it a new port usually lands on another
   * server, which does not have its session: the session is lost. Default false: binding a
   * port in use fails with ERR_SOE_BIND.
   */
  reusePort?: boolean;
  /**
   * Apply the per-IP limits (30 SessionRequests a minute, 4 stateless replies a second per
   * source IP) to loopback clients too. Default false: relays and tests on the same host are
   * not limited.
   */
  limitLoopback?: boolean;
  /** An IP address or "localhost" (SoeServer.listen also resolves other names). Default "0.0.0.0". */
  host?: string;
}

export interface ClientOptions extends SoeOptions {
  /** The local address to bind, "ip:port". Default "0.0.0.0:0" ("[::]:0" to reach IPv6 servers). */
  bind?: string;
}

/** Where to connect: "host:port", "[IPv6]:port", or { host (default "127.0.0.1"), port }. */
export type Target = string | { host?: string; port: number };

export interface MessageInfo {
  /** The reliable channel, 0 to 3 (0 for unreliable and ordered messages). */
  readonly channel: 0 | 1 | 2 | 3;
  readonly kind: 'reliable' | 'unreliable' | 'ordered';
  /** Whether the message travelled without delivery guarantees. */
  readonly unreliable: boolean;
}

export interface DisconnectInfo {
  /** The SOE reason code. */
  readonly code: number;
  /** Whether the peer ended the session. */
  readonly byPeer: boolean;
  /**
   * The flight recorder's capture (pcapng: Wireshark with the soe.lua plugin, or `soe decode
   * --pcap`, reads it) of a recorded session that ended abnormally.
   */
  readonly recording?: Buffer;
}

export interface SessionStats {
  /** Smoothed round trip in ms (0 before a sample). */
  rtt: number;
  /** Reliable packets sent again. */
  resends: number;
  /**
   * Reliable packets lost: declared lost, resent, and acknowledged later than a resend found
   * spurious would be (each packet counted once; a resend the peer did not need is not loss).
   */
  lost: number;
  /** lost per reliable packet sent: the loss the session repaired. */
  loss: number;
  reliablePacketsSent: number;
  /** Resends of packets that later ones overtook (no timer waited). */
  fastResends: number;
  /** Resends found unnecessary: the ack of the original came back. */
  spuriousResends: number;
  /** Reliable packets received again. */
  duplicates: number;
  /** Reliable packets that arrived ahead of the next expected one. */
  outOfOrder: number;
  acksSent: number;
  acksReceived: number;
  datagramsSent: number;
  datagramsReceived: number;
  bytesSent: number;
  bytesReceived: number;
  messagesSent: number;
  messagesReceived: number;
  unreliableSent: number;
  unreliableReceived: number;
  /** Messages send() kept because the session's queue was full, and their bytes. */
  pendingMessages: number;
  bytesQueued: number;
  /** Unreliable and ordered messages dropped because the session's datagram queue was full. */
  unreliableDropped: number;
}

export interface EndpointStats {
  sessions: number;
  datagramsSent: number;
  datagramsReceived: number;
  /** Datagrams per second sent and received since the previous stats() call (0 on the first). */
  sentPerSecond: number;
  receivedPerSecond: number;
}

export interface AddressInfo {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

/** One session with a peer; sessions come from a SoeServer's 'session' event or SoeClient.connect. */
export declare class SoeSession extends EventEmitter {
  private constructor();
  /** This session's id within its endpoint. */
  readonly id: number;
  readonly remoteAddress: string;
  /** The SOE session id (the client chose it). */
  readonly sessionId: number;
  /** For a session a server accepted: the application protocol name its client asked for. */
  readonly protocol: string | undefined;
  readonly closed: boolean;
  /** True after send() returned false, until 'drain'. */
  readonly writableNeedDrain: boolean;
  /** Set on a session made by SoeClient.connect: its client. */
  client?: SoeClient;
  /**
   * Sends a reliable message on channel 0-3; false when it waits for room ('drain' follows).
   * The bytes are copied before it returns (as with sendUnreliable and sendOrdered).
   */
  send(data: Buffer | Uint8Array | string, channel?: 0 | 1 | 2 | 3): boolean;
  /** Sends an unreliable message (one datagram, not empty, first byte not 0), at the end of the tick. */
  sendUnreliable(data: Buffer | Uint8Array | string): void;
  /** Sends an ordered message (unreliable, one datagram, stale ones dropped on arrival), at the end of the tick. */
  sendOrdered(data: Buffer | Uint8Array | string): void;
  /** Turns RC4 on or off for this session from now on: switch before sending the reply that must be encrypted. */
  setEncryption(on: boolean): void;
  stats(): SessionStats;
  /** Starts (default) or stops recording this session; false once it ended. */
  record(on?: boolean): boolean;
  /** This session's recording so far as a pcapng capture, or null when it is not recorded. */
  takeRecording(): Buffer | null;
  /** Closes the session; resolves with the reason's name once it ended. */
  close(reason?: Reason): Promise<ReasonName>;
  on(event: 'message', listener: (data: Buffer, info: MessageInfo) => void): this;
  on(event: 'drain', listener: () => void): this;
  on(event: 'disconnect', listener: (reason: ReasonName, info: DisconnectInfo) => void): this;
  once(event: 'message', listener: (data: Buffer, info: MessageInfo) => void): this;
  once(event: 'drain', listener: () => void): this;
  once(event: 'disconnect', listener: (reason: ReasonName, info: DisconnectInfo) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}

declare class Endpoint extends EventEmitter {
  /** Sessions open now and the datagrams moved. */
  stats(): EndpointStats;
  /** The bound address. */
  address(): AddressInfo;
  /** Where the endpoint runs: 'js' unless options.eventThread asked for 'pump' or the host lacks what 'js' needs, else 'pump'. */
  readonly eventThread: 'pump' | 'js';
  /** Lets the process exit while this endpoint is open, as socket.unref() does. */
  unref(): this;
  /** Undoes unref(). */
  ref(): this;
  /** Closes every session (default reason 'managerDeleted') and the endpoint. */
  close(reason?: Reason): Promise<void>;
}

/** An SOE server, bound at construction. Emits 'session' for each new peer. */
export declare class SoeServer extends Endpoint {
  constructor(options?: ServerOptions);
  /** Creates and binds a server, resolving a host name first. */
  static listen(options?: ServerOptions): Promise<SoeServer>;
  on(event: 'session', listener: (session: SoeSession) => void): this;
  /** With `recordDir`: a recording was written to `file`. */
  on(event: 'recording', listener: (file: string, session: SoeSession) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (error: Error & { code?: string }) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** An SOE client endpoint. */
export declare class SoeClient extends Endpoint {
  constructor(options?: ClientOptions);
  /** Opens a session to "host:port" or { host, port } (host names through dns.lookup). */
  connect(target: Target): Promise<SoeSession>;
  /** A new client with one session; the client is `session.client` and closes with the session. */
  static connect(target: Target, options?: ClientOptions): Promise<SoeSession & { client: SoeClient }>;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (error: Error & { code?: string }) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}
