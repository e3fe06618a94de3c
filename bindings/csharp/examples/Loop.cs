// What both C# examples share: the UDP socket, and the two halves of the loop that move
// datagrams between the socket and the endpoint. Plain .NET sockets; nothing here is part of
// the binding.

using System;
using System.Linq;
using System.Net;
using System.Net.Sockets;

namespace Soe.Examples
{
    internal static class Loop
    {
        /// <summary>A UDP socket on 127.0.0.1:port (0: the system picks) with room for bursts.</summary>
        public static Socket Bind(int port)
        {
            var socket = new Socket(AddressFamily.InterNetwork, SocketType.Dgram, ProtocolType.Udp);
            socket.ReceiveBufferSize = 4 << 20;
            socket.Bind(new IPEndPoint(IPAddress.Loopback, port));
            return socket;
        }

        /// <summary>Waits until a datagram arrives or the endpoint's next deadline (at most
        /// `capMs`).</summary>
        public static void Wait(Socket socket, Endpoint ep, int capMs)
        {
            int waitMs = capMs;
            ulong? deadline = ep.NextTimeout();
            if (deadline.HasValue)
            {
                ulong now = Clock.NowUs();
                ulong ms = deadline.Value <= now ? 0 : (deadline.Value - now + 999) / 1000;
                waitMs = (int)Math.Min(ms, (ulong)capMs);
            }
            socket.Poll(waitMs * 1000, SelectMode.SelectRead);
        }

        /// <summary>Hands every datagram waiting on the socket to the endpoint.</summary>
        public static void ReceiveAll(Socket socket, Endpoint ep, ulong now, byte[] buffer)
        {
            while (socket.Available > 0)
            {
                EndPoint from = new IPEndPoint(IPAddress.Any, 0);
                int n = socket.ReceiveFrom(buffer, ref from);
                ep.HandleDatagram(now, (IPEndPoint)from, new ReadOnlySpan<byte>(buffer, 0, n));
            }
        }

        /// <summary>Sends every datagram the endpoint has.</summary>
        public static void SendAll(Socket socket, Endpoint ep, ulong now, byte[] buffer)
        {
            int length;
            IPEndPoint to;
            while (ep.PollTransmit(now, buffer, out length, out to) == Status.Ok)
            {
                socket.SendTo(buffer, 0, length, SocketFlags.None, to);
            }
        }

        /// <summary>Shutdown: closes every session (gracefully) and drives the endpoint until
        /// none is left (every Disconnect sent), for at most `limitMs`; the sessions left.</summary>
        public static int CloseAllAndDrain(Socket socket, Endpoint ep, byte[] buffer, int limitMs)
        {
            ulong start = Clock.NowUs();
            ep.CloseAll(start);
            for (;;)
            {
                ulong now = Clock.NowUs();
                ReceiveAll(socket, ep, now, buffer);
                ep.HandleTimeout(now);
                Event ev;
                while (ep.PollEvent(buffer, out ev) == Status.Ok) { }
                SendAll(socket, ep, now, buffer);
                int left = ep.SessionCount;
                if (left == 0 || now - start > (ulong)limitMs * 1000) return left;
                Wait(socket, ep, 50);
            }
        }
    }

    /// <summary>SIGINT and SIGTERM as a flag the loop polls. Under mono, Console.CancelKeyPress
    /// never sees SIGINT, so Mono.Posix's UnixSignal watches the signals when it is there (it
    /// is looked up by reflection: the examples need no reference to it); on .NET,
    /// Console.CancelKeyPress (SIGINT) and AppDomain.ProcessExit (SIGTERM) set the flag.</summary>
    internal sealed class Shutdown
    {
        private const string MonoPosix =
            ", Mono.Posix, Version=4.0.0.0, Culture=neutral, PublicKeyToken=0738eb9f132ed756";
        private volatile bool requested;
        private readonly object[] signals;
        private readonly System.Reflection.PropertyInfo isSet;

        public Shutdown()
        {
            Console.CancelKeyPress += (sender, e) => { e.Cancel = true; requested = true; };
            Type unixSignal = Type.GetType("Mono.Unix.UnixSignal" + MonoPosix);
            Type signum = Type.GetType("Mono.Unix.Native.Signum" + MonoPosix);
            if (unixSignal != null && signum != null)
            {
                signals = new[] { "SIGINT", "SIGTERM" }
                    .Select(name => Activator.CreateInstance(unixSignal, Enum.Parse(signum, name)))
                    .ToArray();
                isSet = unixSignal.GetProperty("IsSet");
            }
            else
            {
                signals = new object[0];
                AppDomain.CurrentDomain.ProcessExit += (sender, e) => requested = true;
            }
        }

        /// <summary>Whether SIGINT or SIGTERM arrived.</summary>
        public bool Requested
        {
            get
            {
                foreach (object s in signals)
                {
                    if ((bool)isSet.GetValue(s, null)) requested = true;
                }
                return requested;
            }
        }
    }
}
