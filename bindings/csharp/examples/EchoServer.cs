// An SOE echo server in C# on the soe C library: one UDP socket, a poll loop, and the
// sans-I/O endpoint. Every message goes back the way it came (reliable on its channel,
// unreliable, ordered), with back-pressure: a message that meets a full send queue waits, and
// no more events are taken until it goes.
//
//   mono EchoServer.exe [--port P] [--key TEXT] [--sessions N]
//
// --key TEXT turns RC4 on with the UTF-8 bytes of TEXT. With --sessions N the server exits
// (status 0) once N sessions have closed; on SIGINT or SIGTERM it closes every session, sends
// their Disconnects and exits 0 (Shutdown, in Loop.cs, works under mono). The first line on stdout is
// "listening on 127.0.0.1:PORT".

using System;
using System.Text;

namespace Soe.Examples
{
    internal static class EchoServer
    {
        private static int Main(string[] args)
        {
            int port = 0;
            string key = null;
            long wantClosed = 0;
            for (int i = 0; i < args.Length; i++)
            {
                if (args[i] == "--port" && i + 1 < args.Length) port = int.Parse(args[++i]);
                else if (args[i] == "--key" && i + 1 < args.Length) key = args[++i];
                else if (args[i] == "--sessions" && i + 1 < args.Length) wantClosed = long.Parse(args[++i]);
                else
                {
                    Console.Error.WriteLine("usage: EchoServer.exe [--port P] [--key TEXT] [--sessions N]");
                    return 2;
                }
            }
            var options = new Options { Server = true };
            if (key != null) options.Rc4Key = Encoding.UTF8.GetBytes(key);
            var shutdown = new Shutdown();
            using (var ep = new Endpoint(options, Clock.NowUs()))
            using (var socket = Loop.Bind(port))
            {
                Console.WriteLine("listening on " + socket.LocalEndPoint);
                Console.Out.Flush();
                var datagram = new byte[65536];
                var message = new byte[4096];
                byte[] held = null;
                var heldEvent = default(Event);
                long accepted = 0, closed = 0, echoed = 0;
                while (!shutdown.Requested && (wantClosed == 0 || closed < wantClosed))
                {
                    Loop.Wait(socket, ep, 1000);
                    ulong now = Clock.NowUs();
                    Loop.ReceiveAll(socket, ep, now, datagram);
                    ep.HandleTimeout(now);
                    if (held != null && Echo(ep, heldEvent, held))
                    {
                        held = null;
                        echoed++;
                    }
                    while (held == null)
                    {
                        Event ev;
                        Status s = ep.PollEvent(message, out ev);
                        if (s == Status.Done) break;
                        if (s == Status.ErrBufferTooSmall)
                        {
                            message = new byte[ev.Length];
                            continue;
                        }
                        switch (ev.Kind)
                        {
                            case EventKind.Accepted:
                                accepted++;
                                break;
                            case EventKind.Closed:
                                closed++;
                                Console.WriteLine("session " + ev.Session + " closed: reason " + ev.Reason
                                    + ", by peer " + (ev.ByPeer ? 1 : 0));
                                break;
                            case EventKind.Message:
                                var data = new ReadOnlySpan<byte>(message, 0, ev.Length);
                                if (Echo(ep, ev, data))
                                {
                                    echoed++;
                                }
                                else
                                {
                                    held = data.ToArray();
                                    heldEvent = ev;
                                }
                                break;
                        }
                    }
                    Loop.SendAll(socket, ep, now, datagram);
                }
                Console.WriteLine("EchoServer: " + accepted + " sessions accepted, " + closed
                    + " closed, " + echoed + " messages echoed");
                if (shutdown.Requested)
                {
                    // Say goodbye to every peer before the endpoint goes.
                    int open = ep.SessionCount;
                    int left = Loop.CloseAllAndDrain(socket, ep, datagram, 10000);
                    Console.WriteLine("EchoServer: shutdown: " + (open - left) + " sessions closed, "
                        + left + " left");
                }
            }
            return 0;
        }

        /// <summary>Echoes one message; false when the send queue is full and it must wait.</summary>
        private static bool Echo(Endpoint ep, Event ev, ReadOnlySpan<byte> data)
        {
            try
            {
                Status s;
                switch (ev.Delivery)
                {
                    case Delivery.Reliable: s = ep.Send(ev.Session, ev.Channel, data); break;
                    case Delivery.Ordered: s = ep.SendOrdered(ev.Session, data); break;
                    default: s = ep.SendUnreliable(ev.Session, data); break;
                }
                return s != Status.ErrQueueFull;
            }
            catch (SoeException e)
            {
                // A session that closed meanwhile takes nothing more: not an error for an echo.
                if (e.Status == Status.ErrStaleSession || e.Status == Status.ErrClosed) return true;
                throw;
            }
        }
    }
}
