// Checks of the binding against the loaded library:
//
// * the layout of the binding's structs as the CLR marshals them, printed in the format of
//   tests/layout.c (which prints the C compiler's): `cargo xtask csharp` requires the two to
//   match, so a field added, moved or resized in soe.h without the binding fails CI;
// * each Status member's value has the library's name for it (ErrQueueFull: SOE_ERR_QUEUE_FULL);
// * errors arrive as SoeException with the status and the library's explanation, and the
//   normal outcomes (Done, ErrBufferTooSmall, ErrQueueFull) as statuses.
//
// Exits 0 when every check held; 1 with a line per failure on stderr.

using System;
using System.Net;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text;

namespace Soe.Tests
{
    internal static class Checks
    {
        private static int failures;

        private static void Expect(bool ok, string what)
        {
            if (!ok)
            {
                Console.Error.WriteLine("Checks: FAILED: " + what);
                failures++;
            }
        }

        /// <summary>The status `action` throws, or Ok when it throws none.</summary>
        private static Status Thrown(Action action, string mentions)
        {
            try
            {
                action();
                return Status.Ok;
            }
            catch (SoeException e)
            {
                Expect(e.Message.Contains(mentions), "\"" + e.Message + "\" mentions " + mentions);
                return e.Status;
            }
        }

        /// <summary>ErrQueueFull -> SOE_ERR_QUEUE_FULL.</summary>
        private static string CName(Status s)
        {
            var name = new StringBuilder("SOE");
            foreach (char c in s.ToString())
            {
                if (char.IsUpper(c)) name.Append('_');
                name.Append(char.ToUpperInvariant(c));
            }
            return name.ToString();
        }

        private static void Size(string c, Type t)
        {
            Console.WriteLine(c + " " + Marshal.SizeOf(t));
        }

        private static void Field(string c, string field, Type t, string name)
        {
            Console.WriteLine(c + "." + field + " " + Marshal.OffsetOf(t, name).ToInt64());
        }

        private static bool Disposed(Action action)
        {
            try
            {
                action();
                return false;
            }
            catch (ObjectDisposedException)
            {
                return true;
            }
        }

        /// <summary>Every status the library names has a Status member, every option it knows an
        /// Option member and an Options property, every reason 0..16 a Reason member, and every
        /// native call on an endpoint or config takes the SafeHandle, never an IntPtr.</summary>
        private static void Coverage()
        {
            for (int v = -100; v < 100; v++)
            {
                string name = Marshal.PtrToStringAnsi(NativeName(v));
                if (name != "SOE_UNKNOWN")
                {
                    Expect(Enum.IsDefined(typeof(Status), v), name + " (" + v + ") has a Status member");
                }
            }
            for (ushort r = 0; r <= 16; r++)
            {
                Expect(Enum.IsDefined(typeof(Reason), r), "reason " + r + " has a Reason member");
            }
            foreach (Option o in Enum.GetValues(typeof(Option)))
            {
                Expect(typeof(Options).GetProperty(o.ToString()) != null, "Options." + o);
            }
            Expect(Enum.GetValues(typeof(Option)).Length == KnownOptions(), "Option covers every option of the library");
            var flags = BindingFlags.Static | BindingFlags.NonPublic | BindingFlags.Public;
            foreach (MethodInfo m in typeof(Native).GetMethods(flags))
            {
                ParameterInfo[] ps = m.GetParameters();
                if (m.Name.EndsWith("_free") || ps.Length == 0) continue;
                string first = ps[0].Name;
                if (first == "ep" || first == "config")
                {
                    Expect(typeof(SafeHandle).IsAssignableFrom(ps[0].ParameterType.IsByRef
                        ? ps[0].ParameterType.GetElementType() : ps[0].ParameterType),
                        m.Name + " takes the SafeHandle");
                }
            }
        }

        /// <summary>How many options the loaded library knows: the first number it refuses as
        /// unknown, less one.</summary>
        private static int KnownOptions()
        {
            var flags = BindingFlags.Static | BindingFlags.NonPublic;
            MethodInfo configNew = typeof(Native).GetMethod("soe_config_new", flags);
            MethodInfo get = typeof(Native).GetMethod("soe_config_get", flags);
            var args = new object[] { 1u, null };
            configNew.Invoke(null, args);
            using (var config = (ConfigHandle)args[1])
            {
                for (uint o = 1; o < 1000; o++)
                {
                    var getArgs = new object[] { config, (Option)o, 0L };
                    if ((Status)get.Invoke(null, getArgs) == Status.ErrUnknownOption) return (int)o - 1;
                }
            }
            return -1;
        }

        private static IntPtr NativeName(int status)
        {
            var flags = BindingFlags.Static | BindingFlags.NonPublic;
            return (IntPtr)typeof(Native).GetMethod("soe_status_name", flags).Invoke(null, new object[] { status });
        }

        /// <summary>Sends, moves and takes 2,000 messages after a warm-up; the binding must not
        /// allocate on the way (the library's own memory is not the GC's).</summary>
        private static void NoAllocationPerDatagram(Endpoint client, Endpoint server, ulong session,
            IPEndPoint serverAddr, IPEndPoint clientAddr, ulong now)
        {
            var buf = new byte[2048];
            var message = new byte[64];
            message[0] = 1;
            long before = 0;
            for (int i = 0; i < 3000; i++)
            {
                if (i == 1000) before = GC.GetAllocatedBytesForCurrentThread();
                now += 1000;
                client.SendUnreliable(session, message);
                client.HandleTimeout(now);
                server.HandleTimeout(now);
                int len;
                IPEndPoint to;
                while (client.PollTransmit(now, buf, out len, out to) == Status.Ok)
                    server.HandleDatagram(now, clientAddr, new ReadOnlySpan<byte>(buf, 0, len));
                while (server.PollTransmit(now, buf, out len, out to) == Status.Ok)
                    client.HandleDatagram(now, serverAddr, new ReadOnlySpan<byte>(buf, 0, len));
                Event ev;
                while (server.PollEvent(buf, out ev) == Status.Ok) { }
                while (client.PollEvent(buf, out ev) == Status.Ok) { }
            }
            long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
            Expect(allocated == 0, "2,000 datagrams allocated " + allocated + " bytes");
        }

        /// <summary>A caller that changes the IPEndPoint PollTransmit handed out (its port, its
        /// address) does not misroute the datagrams after it: the cache is the binding's.</summary>
        private static void MutatedEndPointMisroutesNothing(Endpoint client, ulong session,
            IPEndPoint serverAddr, ulong now)
        {
            var buf = new byte[2048];
            int n;
            IPEndPoint to;
            client.Send(session, 0, new byte[4]);
            Expect(client.PollTransmit(now, buf, out n, out to) == Status.Ok, "a datagram");
            to.Port = 9;
            to.Address = IPAddress.Parse("192.0.2.1");
            for (int i = 0; i < 2; i++)
            {
                client.Send(session, 0, new byte[4]);
                IPEndPoint next;
                Expect(client.PollTransmit(now, buf, out n, out next) == Status.Ok, "a datagram");
                Expect(next.Equals(serverAddr) && !ReferenceEquals(next, to),
                    "after the caller changed its IPEndPoint, the next datagram still goes to "
                    + serverAddr + " (got " + next + ")");
            }
        }

        /// <summary>A flood of one-off destinations (a spoofed flood's UnknownSender replies,
        /// 100,000 of them, past any bound of the cache) never costs the live session's datagrams
        /// an allocation.</summary>
        private static void FloodOfDestinations(Endpoint client, Endpoint server, ulong session,
            IPEndPoint serverAddr, IPEndPoint clientAddr, ulong now)
        {
            var buf = new byte[2048];
            var heartbeat = new byte[] { 0x00, 0x06, 0x12, 0x34 };
            var message = new byte[8];
            message[0] = 1;
            long liveBytes = 0;
            int replies = 0;
            for (int i = 0; i < 100000; i++)
            {
                // 5 ms apart: the endpoint's 200 stateless replies a second answer each one.
                now += 5000;
                var spoofed = new IPEndPoint(new IPAddress(new byte[] {
                    10, (byte)(i >> 16), (byte)(i >> 8), (byte)i }), 40000);
                server.HandleDatagram(now, spoofed, heartbeat);
                int len;
                IPEndPoint to;
                while (server.PollTransmit(now, buf, out len, out to) == Status.Ok)
                {
                    if (to.Equals(spoofed)) replies++;
                    else client.HandleDatagram(now, serverAddr, new ReadOnlySpan<byte>(buf, 0, len));
                }
                if (i % 100 != 0) continue;
                // The live session: a message each way, its datagrams measured alone.
                client.SendUnreliable(session, message);
                server.HandleTimeout(now);
                client.HandleTimeout(now);
                long before = GC.GetAllocatedBytesForCurrentThread();
                while (client.PollTransmit(now, buf, out len, out to) == Status.Ok)
                {
                    liveBytes += GC.GetAllocatedBytesForCurrentThread() - before;
                    server.HandleDatagram(now, clientAddr, new ReadOnlySpan<byte>(buf, 0, len));
                    before = GC.GetAllocatedBytesForCurrentThread();
                }
                Event ev;
                while (server.PollEvent(buf, out ev) == Status.Ok) { }
            }
            Expect(replies > 65536, "the flood drew " + replies + " replies to distinct addresses");
            Expect(liveBytes == 0, "during the flood the live session's datagrams allocated "
                + liveBytes + " bytes");
        }

        /// <summary>Negative durations other than Options.Never are refused, not truncated
        /// into SOE_NEVER. Built from ticks: Mono's TimeSpan.FromMilliseconds rounds to whole
        /// milliseconds (-0.5 ms is -1 ms, Options.Never itself; -1.5 ms is -2 ms), so it cannot
        /// make the durations between -1 and -2 ms that truncation turned into SOE_NEVER.</summary>
        private static void NegativeDurations()
        {
            const long tick = 1, ms = TimeSpan.TicksPerMillisecond;
            foreach (long ticks in new[] { -tick, -ms / 2, -ms - tick, -ms - ms / 2, -2 * ms, -1000 * ms })
            {
                var d = TimeSpan.FromTicks(ticks);
                var o = new Options { IdleTimeout = d };
                bool refused = false;
                try { new Endpoint(o, 0).Dispose(); }
                catch (ArgumentOutOfRangeException) { refused = true; }
                Expect(refused, "IdleTimeout " + d.TotalMilliseconds + " ms is refused");
            }
            using (var e = new Endpoint(new Options { IdleTimeout = Options.Never }, 0)) { }
        }

        /// <summary>The flight recorder: a session that dies of 100 % loss leaves a pcapng capture,
        /// taken once at its Closed event; a live session's is taken on request.</summary>
        private static void FlightRecorder()
        {
            var options = new Options { Server = true, RecordSessions = true, IdleTimeout = TimeSpan.FromSeconds(2) };
            using (var server = new Endpoint(options, 1000000))
            using (var client = new Endpoint(new Options { HeartbeatInterval = Options.Never }, 1000000))
            {
                var serverAddr = new IPEndPoint(IPAddress.Loopback, 20042);
                var clientAddr = new IPEndPoint(IPAddress.Loopback, 40000);
                ulong session = client.Connect(1000000, serverAddr);
                client.SetRecording(session, true);
                var buf = new byte[2048];
                ulong now = 1000000;
                byte[] closedCapture = null, again = new byte[0];
                bool closed = false;
                for (int round = 0; round < 1000 && !closed; round++)
                {
                    now += 10000;
                    bool lossy = round >= 100;
                    if (!lossy && round % 10 == 5) client.Send(session, 0, new byte[] { 1, 2, 3, (byte)round });
                    client.HandleTimeout(now);
                    server.HandleTimeout(now);
                    int len;
                    IPEndPoint to;
                    while (client.PollTransmit(now, buf, out len, out to) == Status.Ok)
                        if (!lossy) server.HandleDatagram(now, clientAddr, new ReadOnlySpan<byte>(buf, 0, len));
                    while (server.PollTransmit(now, buf, out len, out to) == Status.Ok)
                        if (!lossy) client.HandleDatagram(now, serverAddr, new ReadOnlySpan<byte>(buf, 0, len));
                    Event ev;
                    while (client.PollEvent(buf, out ev) == Status.Ok) { }
                    while (server.PollEvent(buf, out ev) == Status.Ok)
                    {
                        if (ev.Kind != EventKind.Closed) continue;
                        Expect(ev.Reason == Reason.Timeout, "the server's session timed out (" + ev.Reason + ")");
                        closedCapture = server.TakeRecording(ev.Session, now, serverAddr);
                        again = server.TakeRecording(ev.Session, now, serverAddr);
                        closed = true;
                    }
                }
                Expect(closed, "the server's session ended");
                Expect(closedCapture != null && closedCapture.Length > 1000 && closedCapture[0] == 0x0A
                    && closedCapture[1] == 0x0D, "the recording of the session lost is a pcapng capture");
                Expect(again == null, "a recording is taken once");
                byte[] live = client.TakeRecording(session, now, clientAddr);
                Expect(live != null && live.Length > 100, "a live session's recording");
                string path = System.IO.Path.GetTempFileName();
                Expect(client.WriteRecording(session, now, clientAddr, path), "a recording written to a file");
                Expect(System.IO.File.ReadAllBytes(path)[0] == 0x0A, "the file is a pcapng capture");
                System.IO.File.Delete(path);
                client.SetRecording(session, false);
                Expect(client.TakeRecording(session, now, clientAddr) == null, "stopped: nothing recorded");
            }
        }

        private static int Main()
        {
            Type addr = typeof(Native.Addr);
            Type evType = typeof(Event), stats = typeof(Stats);
            Size("soe_addr", addr);
            Field("soe_addr", "family", addr, "Family");
            Field("soe_addr", "port", addr, "Port");
            Field("soe_addr", "ip", addr, "Ip");
            Field("soe_addr", "scope_id", addr, "ScopeId");
            Size("soe_event", evType);
            Field("soe_event", "kind", evType, "Kind");
            Field("soe_event", "session", evType, "Session");
            Field("soe_event", "channel", evType, "Channel");
            Field("soe_event", "delivery", evType, "Delivery");
            Field("soe_event", "len", evType, "len");
            Field("soe_event", "reason", evType, "Reason");
            Field("soe_event", "by_peer", evType, "byPeer");
            Field("soe_event", "user", evType, "User");
            Size("soe_stats", stats);
            Field("soe_stats", "rtt_us", stats, "RttUs");
            Field("soe_stats", "unreliable_received", stats, "UnreliableReceived");
            foreach (Status s in Enum.GetValues(typeof(Status)))
            {
                Expect(Native.StatusName(s) == CName(s), s + " is " + Native.StatusName(s) + " in the library");
            }
            Expect(Native.LoadedAbiVersion() == Native.AbiVersion, "the ABI version");
            Coverage();
            Expect(Native.Version().Length > 0, "a version string");

            // Errors are exceptions with the status and the explanation.
            Expect(Thrown(() => new Endpoint(new Options { Rc4Key = new byte[300] }, 0), "rc4_key_len")
                == Status.ErrInvalidConfig, "a 300-byte key is an invalid config");
            Expect(Thrown(() => new Endpoint(new Options { MaxMessageSize = 5000000 }, 0), "SOE_OPT_MAX_MESSAGE_SIZE")
                == Status.ErrInvalidConfig, "max_message_size above 4 MiB is an invalid config");
            using (var server = new Endpoint(new Options { Server = true, MaxQueuedMessages = 2 }, 1000000))
            using (var client = new Endpoint(new Options { MaxQueuedMessages = 2 }, 1000000))
            {
                var serverAddr = new IPEndPoint(IPAddress.Loopback, 20042);
                var clientAddr = new IPEndPoint(IPAddress.Loopback, 40000);
                ulong session = client.Connect(1000000, serverAddr);
                Expect(session != 0, "a session handle");
                Expect(Thrown(() => client.Connect(1000000, serverAddr), "exists") == Status.ErrConnect,
                    "a second session to one address is refused");
                Expect(Thrown(() => client.Send(session, 4, new byte[1]), "channel") == Status.ErrInvalidArgument,
                    "channel 4");
                Expect(Thrown(() => client.Close(1000000, session, (Reason)17), "reason") == Status.ErrInvalidArgument,
                    "reason 17");
                Expect(Thrown(() => client.Send(999, 0, new byte[1]), "999") == Status.ErrStaleSession,
                    "an unknown handle");
                // Back-pressure is a status, not an exception.
                Status s = Status.Ok;
                int queued = 0;
                while (queued < 100 && (s = client.Send(session, 1, new byte[100])) == Status.Ok) queued++;
                Expect(s == Status.ErrQueueFull && queued == 2, "the queue takes 2, then ErrQueueFull");
                // The handshake and the messages, in memory; a short buffer keeps the event.
                var buf = new byte[2048];
                ulong now = 1000000;
                for (int round = 0; round < 10; round++)
                {
                    now += 5000;
                    client.HandleTimeout(now);
                    server.HandleTimeout(now);
                    int len;
                    IPEndPoint to;
                    while (client.PollTransmit(now, buf, out len, out to) == Status.Ok)
                    {
                        Expect(to.Equals(serverAddr), "the datagram goes to the server");
                        server.HandleDatagram(now, clientAddr, new ReadOnlySpan<byte>(buf, 0, len));
                    }
                    while (server.PollTransmit(now, buf, out len, out to) == Status.Ok)
                    {
                        client.HandleDatagram(now, serverAddr, new ReadOnlySpan<byte>(buf, 0, len));
                    }
                }
                Event ev;
                int messages = 0, tooSmall = 0;
                var small = new byte[10];
                Status polled;
                while ((polled = server.PollEvent(small, out ev)) != Status.Done)
                {
                    if (polled == Status.ErrBufferTooSmall)
                    {
                        tooSmall++;
                        Expect(ev.Length == 100, "the size needed");
                        Expect(server.PollEvent(buf, out ev) == Status.Ok && ev.Length == 100, "the kept event");
                        messages++;
                    }
                }
                Expect(messages == 2 && tooSmall == 2, "two messages, each first too large for 10 bytes");
                Expect(client.SessionCount == 1 && client.Stats(session).ReliableMessagesSent == 2, "stats");
                Expect(client.NextTimeout().HasValue, "a deadline");
                NoAllocationPerDatagram(client, server, session, serverAddr, clientAddr, now);
                // The same address comes back as the same IPEndPoint.
                IPEndPoint first = null, second = null;
                int n;
                client.Send(session, 0, new byte[4]);
                client.PollTransmit(now, buf, out n, out first);
                client.Send(session, 0, new byte[4]);
                client.PollTransmit(now, buf, out n, out second);
                Expect(ReferenceEquals(first, second), "one IPEndPoint per destination");
                MutatedEndPointMisroutesNothing(client, session, serverAddr, now);
                FloodOfDestinations(client, server, session, serverAddr, clientAddr, now);
                // A short buffer: ErrBufferTooSmall with the size needed, the datagram kept.
                client.Send(session, 0, new byte[300]);
                Expect(client.PollTransmit(now, new byte[8], out n, out first) == Status.ErrBufferTooSmall
                    && n > 300, "PollTransmit reports the size needed (" + n + ")");
                Expect(client.PollTransmit(now, buf, out n, out first) == Status.Ok && n > 300,
                    "the kept datagram");
            }
            NegativeDurations();
            FlightRecorder();
            using (var preset = new Endpoint(new Options { Server = true, Preset = Preset.FreeRealms, UdpLength = 600 }, 0)) { }
            var disposed = new Endpoint(new Options(), 0);
            disposed.Dispose();
            Expect(Disposed(() => disposed.HandleTimeout(1)), "a disposed endpoint refuses calls");
            if (failures > 0)
            {
                Console.Error.WriteLine("Checks: " + failures + " failed");
                return 1;
            }
            Console.Error.WriteLine("Checks: every check held");
            return 0;
        }
    }
}
