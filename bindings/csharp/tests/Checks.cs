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

        private static int Main()
        {
            Type addr = typeof(Native.Addr), config = typeof(Native.Config);
            Type evType = typeof(Event), stats = typeof(Stats);
            Size("soe_addr", addr);
            Field("soe_addr", "family", addr, "Family");
            Field("soe_addr", "port", addr, "Port");
            Field("soe_addr", "ip", addr, "Ip");
            Field("soe_addr", "scope_id", addr, "ScopeId");
            Size("soe_config", config);
            Field("soe_config", "role", config, "Role");
            Field("soe_config", "application_protocol", config, "ApplicationProtocol");
            Field("soe_config", "udp_length", config, "UdpLength");
            Field("soe_config", "crc_length", config, "CrcLength");
            Field("soe_config", "compression", config, "Compression");
            Field("soe_config", "rc4_key", config, "Rc4Key");
            Field("soe_config", "rc4_key_len", config, "Rc4KeyLen");
            Field("soe_config", "rc4_at_start", config, "Rc4AtStart");
            Field("soe_config", "max_sessions", config, "MaxSessions");
            Field("soe_config", "max_half_open", config, "MaxHalfOpen");
            Field("soe_config", "max_message_size", config, "MaxMessageSize");
            Field("soe_config", "max_queued_messages", config, "MaxQueuedMessages");
            Field("soe_config", "idle_timeout_ms", config, "IdleTimeoutMs");
            Field("soe_config", "connect_timeout_ms", config, "ConnectTimeoutMs");
            Field("soe_config", "heartbeat_interval_ms", config, "HeartbeatIntervalMs");
            Size("soe_event", evType);
            Field("soe_event", "kind", evType, "Kind");
            Field("soe_event", "session", evType, "Session");
            Field("soe_event", "channel", evType, "Channel");
            Field("soe_event", "delivery", evType, "Delivery");
            Field("soe_event", "len", evType, "len");
            Field("soe_event", "reason", evType, "Reason");
            Field("soe_event", "by_peer", evType, "byPeer");
            Size("soe_stats", stats);
            Field("soe_stats", "rtt_us", stats, "RttUs");
            Field("soe_stats", "unreliable_received", stats, "UnreliableReceived");
            foreach (Status s in Enum.GetValues(typeof(Status)))
            {
                Expect(Native.StatusName(s) == CName(s), s + " is " + Native.StatusName(s) + " in the library");
            }
            Expect(Native.soe_abi_version() == Native.AbiVersion, "the ABI version");
            Expect(Native.Version().Length > 0, "a version string");

            // Errors are exceptions with the status and the explanation.
            Expect(Thrown(() => new Endpoint(new Options { Rc4Key = new byte[300] }, 0), "rc4_key_len")
                == Status.ErrInvalidConfig, "a 300-byte key is an invalid config");
            Expect(Thrown(() => new Endpoint(new Options { MaxMessageSize = 5000000 }, 0), "max_message_size")
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
                Expect(Thrown(() => client.Close(1000000, session, 17), "reason") == Status.ErrInvalidArgument,
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
            }
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
