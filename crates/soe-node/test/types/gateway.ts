// h1z1-server's GatewayServer, as it uses its SOEServer, compiled against soe-node/h1z1.
import { EventEmitter } from 'node:events';
import { SOEServer, SOEOutputChannels, type SOEClient, type crc_length_options } from 'soe-node/h1z1';

export class GatewayServer extends EventEmitter {
  public _soeServer: SOEServer;
  private _crcLength: crc_length_options;
  private _udpLength: number;

  constructor(serverPort: number, gatewayKey: Uint8Array) {
    super();
    this._crcLength = 2;
    this._udpLength = 512;
    this._soeServer = new SOEServer(serverPort, gatewayKey);
    this._soeServer._useEncryption = false;
    this._soeServer.keepAliveTimeoutTime = 20000;
    this._soeServer.on('disconnect', (client: SOEClient) => {
      this.emit('disconnect', client.sessionId);
      // Addition: the flight recorder's capture of a client that ended abnormally.
      const capture: Buffer | undefined = client.recording;
      if (capture !== undefined) this.emit('recording', capture);
    });
    this._soeServer.recordSessions = true;
    this._soeServer.recordDir = '/var/tmp/soe';
    this._soeServer.on('recording', (file: string, client: SOEClient) => console.log(file, client.soeClientId));
    this._soeServer.on('appdata', (client: SOEClient, data: Uint8Array, isRawData?: boolean) => {
      if (isRawData) {
        this.emit('tunneldata', client, data, 0);
        return;
      }
      if (Buffer.from(data).toString() === 'LoginRequest') {
        this._soeServer.setEncryption(client, true);
        this._soeServer.sendAppData(client, new Uint8Array([1]));
        this.emit('login', client.soeClientId);
      }
    });
  }

  getSoeClientAvgPing(soeClientId: string): number | undefined {
    return this._soeServer.getSoeClient(soeClientId)?.avgPing;
  }

  isSoeClientFlooded(soeClientId: string): boolean {
    return !this._soeServer.getSoeClient(soeClientId)?.outputStream.isFlooded();
  }

  getSoeClientNetworkStats(soeClientId: string): string[] | undefined {
    return this._soeServer.getSoeClient(soeClientId)?.getNetworkStats();
  }

  getServerNetworkStats(): string[] {
    return this._soeServer.getNetworkStats();
  }

  getSoeClientSessionId(soeClientId: string): number | undefined {
    return this._soeServer.getSoeClient(soeClientId)?.sessionId;
  }

  getSoeClientNetworkInfos(soeClientId: string): { address: string; port: number } | undefined {
    const client = this._soeServer.getSoeClient(soeClientId);
    if (client) return { address: client.address, port: client.port };
  }

  deleteSoeClient(soeClientId: string): void {
    const soeClient = this._soeServer.getSoeClient(soeClientId);
    if (soeClient) this._soeServer.deleteClient(soeClient);
  }

  start(): void {
    this._soeServer.start(this._crcLength, this._udpLength);
  }

  sendTunnelData(soeClientId: string, tunnelData: Buffer, channel: SOEOutputChannels): void {
    const client = this._soeServer.getSoeClient(soeClientId);
    if (client) {
      this._soeServer.sendAppData(client, tunnelData, channel);
      this._soeServer.sendAppData(client, tunnelData, SOEOutputChannels.Ordered);
      this._soeServer.sendUnbufferedAppData(client, tunnelData);
      this._soeServer.toggleEncryption(client);
    }
  }

  async stop(): Promise<void> {
    await this._soeServer.stop();
  }
}

// @ts-expect-error: channels are SOEOutputChannels values
new SOEServer(0, new Uint8Array(1)).sendAppData(undefined as unknown as SOEClient, new Uint8Array(1), 'Fast');
