// Type declarations of soe-node (checked against index.js by test/soe.test.mjs).
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

/** Settings of an endpoint and its sessions. Durations in milliseconds. */
export interface SoeOptions {
  /** The application protocol name (both sides must agree). Default "SoeEcho". */
  protocol?: string;
  /** The largest datagram announced and sent, 64 to 65507. Default 512. */
  udpLength?: number;
  /** The CRC trailer a server announces: 0, 2 or 4. Default 2. */
  crcLength?: number;
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
}

export interface ServerOptions extends SoeOptions {
  /** Default 0: any free port. */
  port?: number;
  /** Default "0.0.0.0". */
  host?: string;
}

export interface ClientOptions extends SoeOptions {
  /** The local address to bind. Default "0.0.0.0:0". */
  bind?: string;
}

export interface MessageInfo {
  /** The reliable channel, 0 to 3 (0 for unreliable and ordered messages). */
  channel: number;
  kind: 'reliable' | 'unreliable' | 'ordered';
  /** Whether the message travelled without delivery guarantees. */
  unreliable: boolean;
}

export interface DisconnectInfo {
  /** The SOE reason code. */
  code: number;
  /** Whether the peer ended the session. */
  byPeer: boolean;
}

export interface SessionStats {
  /** Smoothed round trip in ms (0 before a sample). */
  rtt: number;
  /** Reliable packets sent again. */
  resends: number;
  /** Resends per reliable packet sent: the loss the session repaired. */
  loss: number;
  reliablePacketsSent: number;
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
}

export interface EndpointStats {
  sessions: number;
  datagramsSent: number;
  datagramsReceived: number;
  /** Datagrams per second sent and received since the previous stats() call (0 on the first). */
  sentPerSecond: number;
  receivedPerSecond: number;
}

/** One session with a peer. */
export declare class SoeSession extends EventEmitter {
  readonly id: number;
  readonly remoteAddress: string;
  readonly closed: boolean;
  /** True after send() returned false, until 'drain'. */
  readonly writableNeedDrain: boolean;
  /** Sends a reliable message on channel 0-3; false when it waits for room ('drain' follows). */
  send(data: Buffer | Uint8Array | string, channel?: number): boolean;
  /** Sends an unreliable message (one datagram, not empty, first byte not 0). */
  sendUnreliable(data: Buffer | Uint8Array | string): void;
  /** Turns RC4 on or off for this session from now on. */
  setEncryption(on: boolean): void;
  stats(): SessionStats;
  /** Closes the session; resolves with the reason once it ended. */
  close(reason?: ReasonName | number): Promise<string>;
  on(event: 'message', listener: (data: Buffer, info: MessageInfo) => void): this;
  on(event: 'drain', listener: () => void): this;
  on(event: 'disconnect', listener: (reason: string, info: DisconnectInfo) => void): this;
  once(event: 'message', listener: (data: Buffer, info: MessageInfo) => void): this;
  once(event: 'drain', listener: () => void): this;
  once(event: 'disconnect', listener: (reason: string, info: DisconnectInfo) => void): this;
}

declare class Endpoint extends EventEmitter {
  /** Sessions open now and the datagrams moved. */
  stats(): EndpointStats;
  /** The bound address. */
  address(): { address: string; port: number };
  /** Closes every session and the endpoint. */
  close(reason?: ReasonName | number): Promise<void>;
}

/** An SOE server, bound at construction. Emits 'session' for each new peer. */
export declare class SoeServer extends Endpoint {
  constructor(options?: ServerOptions);
  static listen(options?: ServerOptions): Promise<SoeServer>;
  on(event: 'session', listener: (session: SoeSession) => void): this;
  on(event: 'close', listener: () => void): this;
}

/** An SOE client endpoint. */
export declare class SoeClient extends Endpoint {
  constructor(options?: ClientOptions);
  /** Opens a session to "host:port" or { host, port }. */
  connect(target: string | { host?: string; port: number }): Promise<SoeSession>;
  /** A new client with one session; the client is `session.client`. */
  static connect(target: string | { host?: string; port: number }, options?: ClientOptions): Promise<SoeSession & { client: SoeClient }>;
}
