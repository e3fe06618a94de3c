// The addon's API, typed: what must compile, and (@ts-expect-error) what must not.
import { SoeServer, SoeClient, SoeSession, REASONS, type MessageInfo, type ReasonName } from 'soe-node';

export async function echo(): Promise<void> {
  const server = await SoeServer.listen({ host: '127.0.0.1', port: 0, rc4Key: Buffer.from('key'), rc4AtStart: false });
  server.on('session', (session: SoeSession) => {
    session.on('message', (data: Buffer, info: MessageInfo) => {
      if (info.kind === 'reliable') session.send(data, info.channel);
      // @ts-expect-error: a message's info is read-only
      info.kind = 'unreliable';
    });
    session.on('disconnect', (reason: ReasonName, { code, byPeer }) => console.log(reason, code, byPeer));
    // The flight recorder: one session by request, its capture live or at its disconnect.
    const recording: boolean = session.record();
    const live: Buffer | null = session.takeRecording();
    session.on('disconnect', (_reason: ReasonName, info) => {
      const capture: Buffer | undefined = info.recording;
      console.log(recording, live?.length, capture?.length);
    });
  });
  server.on('recording', (file: string, recorded: SoeSession) => console.log(file, recorded.id));
  // @ts-expect-error: recordSessions is a boolean
  new SoeServer({ recordSessions: 'yes' });
  new SoeServer({ recordSessions: true, recordSessionBytes: 65536, recordEndpointBytes: 1 << 26, recordKeys: false, recordDir: '/tmp' });
  const session = await SoeClient.connect({ host: 'localhost', port: server.address().port });
  session.client.unref().ref();
  if (!session.send(Buffer.from('hello'), 2)) await new Promise((resolve) => session.once('drain', resolve));
  session.setEncryption(true);
  await session.close(REASONS.application);
  await session.close('reliableOverflow');
  // @ts-expect-error: not a reason
  await session.close('bogus');
  // @ts-expect-error: sessions come from a server or a client
  new SoeSession();
  // @ts-expect-error: channels are 0 to 3
  session.send(Buffer.from('x'), 4);
  // @ts-expect-error: the CRC length is 0, 2 or 4
  new SoeServer({ crcLength: 3 });
  await server.close();
}
