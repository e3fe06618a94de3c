// An SOE echo client in C# on the soe C library: connects, sends --count messages of --size
// bytes on reliable channel 0 (20 KB ones travel as fragments), verifies each echo byte for
// byte, closes cleanly (reason Application), and checks that the handle is stale afterwards.
//
//   mono EchoClient.exe HOST PORT [--key TEXT] [--count N] [--size BYTES]
//
// Exits 0 when every echo matched and the close completed, 1 otherwise.

using System;
using System.Net;
using System.Text;

namespace Soe.Examples
{
    internal static class EchoClient
    {
        private static int Main(string[] args)
        {
            if (args.Length < 2)
            {
                Console.Error.WriteLine("usage: EchoClient.exe HOST PORT [--key TEXT] [--count N] [--size BYTES]");
                return 2;
            }
            var server = new IPEndPoint(IPAddress.Parse(args[0]), int.Parse(args[1]));
            string key = null;
            int count = 10, size = 1000;
            for (int i = 2; i < args.Length; i++)
            {
                if (args[i] == "--key" && i + 1 < args.Length) key = args[++i];
                else if (args[i] == "--count" && i + 1 < args.Length) count = int.Parse(args[++i]);
                else if (args[i] == "--size" && i + 1 < args.Length) size = int.Parse(args[++i]);
                else
                {
                    Console.Error.WriteLine("EchoClient: unknown argument " + args[i]);
                    return 2;
                }
            }
            var options = new Options { Server = false };
            if (key != null) options.Rc4Key = Encoding.UTF8.GetBytes(key);
            try
            {
                return Run(options, server, count, size);
            }
            catch (SoeException e)
            {
                Console.Error.WriteLine("EchoClient: " + e.Message);
                return 1;
            }
        }

        private static int Run(Options options, IPEndPoint server, int count, int size)
        {
            using (var ep = new Endpoint(options, Clock.NowUs()))
            using (var socket = Loop.Bind(0))
            {
                ulong session = ep.Connect(Clock.NowUs(), server);
                var datagram = new byte[65536];
                var received = new byte[Math.Max(size, 64)];
                var sent = new byte[size];
                int verified = 0, next = 0;
                bool connected = false, closing = false, closed = false, waiting = false;
                DateTime giveUp = DateTime.UtcNow.AddSeconds(30);
                while (!closed)
                {
                    if (DateTime.UtcNow > giveUp)
                    {
                        Console.Error.WriteLine("EchoClient: gave up after 30 s (" + verified + " echoes)");
                        return 1;
                    }
                    Loop.Wait(socket, ep, 100);
                    ulong now = Clock.NowUs();
                    Loop.ReceiveAll(socket, ep, now, datagram);
                    ep.HandleTimeout(now);
                    Event ev;
                    Status s;
                    while ((s = ep.PollEvent(received, out ev)) != Status.Done)
                    {
                        if (s == Status.ErrBufferTooSmall)
                        {
                            received = new byte[ev.Length];
                            continue;
                        }
                        if (ev.Kind == EventKind.Connected)
                        {
                            connected = true;
                        }
                        else if (ev.Kind == EventKind.Message)
                        {
                            Fill(sent, next - 1);
                            if (!new ReadOnlySpan<byte>(received, 0, ev.Length).SequenceEqual(sent))
                            {
                                Console.Error.WriteLine("EchoClient: echo " + (next - 1) + " differs");
                                return 1;
                            }
                            verified++;
                            waiting = false;
                        }
                        else if (ev.Kind == EventKind.Closed)
                        {
                            if (!closing || ev.Reason != Reason.Application || ev.ByPeer)
                            {
                                Console.Error.WriteLine("EchoClient: session closed: reason " + ev.Reason
                                    + ", by peer " + ev.ByPeer);
                                return 1;
                            }
                            closed = true;
                        }
                    }
                    if (connected && !waiting && !closing)
                    {
                        if (next < count)
                        {
                            Fill(sent, next);
                            if (ep.Send(session, 0, sent) == Status.Ok)
                            {
                                next++;
                                waiting = true;
                            }
                        }
                        else
                        {
                            Console.WriteLine("EchoClient: " + verified + " echoes verified; rtt "
                                + ep.Stats(session).RttUs + " us, " + ep.Stats(session).Resends + " resends");
                            ep.Close(now, session, Reason.Application);
                            closing = true;
                        }
                    }
                    Loop.SendAll(socket, ep, now, datagram);
                }
                // The handle of a closed session names nothing any more.
                try
                {
                    ep.Send(session, 0, sent);
                    Console.Error.WriteLine("EchoClient: a send on the closed session's handle worked");
                    return 1;
                }
                catch (SoeException e)
                {
                    if (e.Status != Status.ErrStaleSession) throw;
                }
                Console.WriteLine("EchoClient: closed cleanly");
                return verified == count ? 0 : 1;
            }
        }

        /// <summary>Message `seq`: its number, then a pattern that depends on it.</summary>
        private static void Fill(byte[] buffer, int seq)
        {
            for (int i = 0; i < buffer.Length; i++)
            {
                buffer[i] = (byte)(seq * 31 + i * 7 + 1);
            }
            if (buffer.Length >= 4)
            {
                buffer[0] = (byte)seq;
                buffer[1] = (byte)(seq >> 8);
                buffer[2] = (byte)(seq >> 16);
                buffer[3] = (byte)(seq >> 24);
            }
        }
    }
}
