// What both C# examples share: the UDP socket, and the two halves of the loop that move
// datagrams between the socket and the endpoint. Plain .NET sockets; nothing here is part of
// the binding.

using System;
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
    }
}
