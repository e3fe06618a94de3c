// Type declarations of soe-node/h1z1: h1z1-server's SOEServer surface (compiled with
// tsc --strict by test/types.test.mjs, with code written the way h1z1-server writes it).
/// <reference types="node" />
import { EventEmitter } from 'node:events';
import type { AddressInfo } from './index';

/** h1z1-server's output channels: the third argument of sendAppData. */
export declare const SOEOutputChannels: Readonly<{
  Reliable: 'Reliable';
  Raw: 'Raw';
  Ordered: 'Ordered';
}>;
export type SOEOutputChannels = (typeof SOEOutputChannels)[keyof typeof SOEOutputChannels];

/** h1z1-server's crc_length_options (this stack also serves 4). */
export type crc_length_options = 0 | 2 | 4;

/** What the servers read of a client's output stream. */
export declare class SOEOutputStream {
  private constructor();
  /** Whether this client's reliable data is backed up (its send queue is full). */
  isFlooded(): boolean;
  /** Whether this client's data is encrypted now. */
  isUsingEncryption(): boolean;
}

/** One client of an SOEServer. Servers may add their own properties to it, as LoginServer does. */
export declare class SOEClient {
  private constructor();
  /** "address:port": the key of getSoeClient. */
  readonly soeClientId: string;
  /** The SOE session id the client chose. */
  readonly sessionId: number;
  readonly address: string;
  readonly port: number;
  readonly family: 'IPv4' | 'IPv6';
  /** The application protocol the client asked for (LoginUdp_9, LoginUdp_11, ...). */
  readonly protocolName: string;
  readonly crcLength: number;
  readonly serverUdpLength: number;
  /** Set by deleteClient, and when the session ended. */
  readonly isDeleted: boolean;
  /**
   * Addition (not in h1z1-server): with `recordSessions`, the flight recorder's capture
   * (pcapng) of a client that ended abnormally, set before 'disconnect'.
   */
  readonly recording?: Buffer;
  /** The smoothed round trip to this client in ms (0 before the first sample). */
  readonly avgPing: number;
  /** Whether this client's data is encrypted now. */
  readonly useEncryption: boolean;
  readonly outputStream: SOEOutputStream;
  /** Lines for a /netstats command: loss and out-of-order rates, and the average ping. */
  getNetworkStats(): string[];
  [extra: string]: unknown;
}

export declare class SOEServer extends EventEmitter {
  constructor(serverPort: number, cryptoKey: Uint8Array);
  _serverPort: number;
  _serverAddress: string;
  _cryptoKey: Uint8Array;
  _udpLength: number;
  _crcLength: crc_length_options;
  /** Whether sessions start encrypted (read by start()). */
  _useEncryption: boolean;
  /** A client silent this long (ms) is disconnected; 0 never (read by start()). */
  keepAliveTimeoutTime: number;
  /** Accepted for compatibility; not used. */
  _waitTimeMs: number;
  /**
   * Small messages sent to a client together go in one reliable packet as a Group (read by
   * start(); not in h1z1-server, which sends one per packet). Default true; false for tools
   * that count packets as messages.
   */
  bundleMessages: boolean;
  /**
   * Share the port with other servers that set it too (SO_REUSEPORT, as h1z1-server's sockets
   * do; read by start(); not in h1z1-server). The servers of one process share one secret and
   * one set of per-source limits; a client whose NAT gives it a new port usually lands on
   * another server and loses its session. Default false: a port in use fails with ERR_SOE_BIND.
   */
  reusePort: boolean;
  /**
   * Whether start() applies the per-IP limits to loopback clients too (not in h1z1-server).
   * Default false: relays and tests on the same host are not limited.
   */
  limitLoopback: boolean;
  /** Addition: a known client's settings for start() ('free-realms', 'osfr-libsoe', 'h1z1', 'planetside2'); default none. */
  preset?: 'free-realms' | 'osfr-libsoe' | 'h1z1' | 'planetside2';
  /** Addition: where the server runs, 'js' (default) or 'pump' (read by start(); see soe-node's eventThread). */
  eventThread?: 'pump' | 'js';
  /** Addition: the flight recorder records every client (read by start()). Default false. */
  recordSessions: boolean;
  /** Addition: each recording of a client that ended abnormally is written here (read by start()). */
  recordDir?: string;
  /** Whether unreliable datagrams from clients reach 'appdata' (with isRawData true). */
  _allowRawDataReception: boolean;
  avgEventLoopLag: number;
  currentEventLoopLag: number;
  /** Binds and starts accepting clients. */
  start(crcLength?: crc_length_options, udpLength?: number): void;
  /** Closes every session (each client hears a Disconnect) and the port. */
  stop(): Promise<void>;
  /** The bound address (not in h1z1-server). */
  address(): AddressInfo;
  getSoeClient(soeClientId: string): SOEClient | undefined;
  /** Lines for a /netstats command: the event loop's average lag. */
  getNetworkStats(): string[];
  sendAppData(client: SOEClient, data: Uint8Array, channel?: SOEOutputChannels): void;
  sendUnbufferedAppData(client: SOEClient, data: Uint8Array): void;
  setEncryption(client: SOEClient, value: boolean): void;
  toggleEncryption(client: SOEClient): void;
  deleteClient(client: SOEClient): void;
  on(event: 'connect', listener: (client: SOEClient) => void): this;
  on(event: 'appdata', listener: (client: SOEClient, data: Buffer, isRawData?: boolean) => void): this;
  on(event: 'disconnect', listener: (client: SOEClient) => void): this;
  /** Addition: with `recordDir`, a client's recording was written to `file`. */
  on(event: 'recording', listener: (file: string, client: SOEClient) => void): this;
  on(event: 'error', listener: (error: Error & { code?: string }) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}
