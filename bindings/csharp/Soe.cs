// Soe.cs: a C# binding of the SOE protocol endpoint's C library (soe.h, libsoe.so.0).
//
// The host owns the socket, the clock and the loop, as in C: hand each datagram in with its
// source and the time, take datagrams out with their destination, take events, and call back
// at the next deadline. See bindings/csharp/README.md and docs/c-api.md.
//
// Written against .NET Standard 2.1 APIs only (Span<T>, MemoryMarshal, SafeHandle, Marshal,
// IPEndPoint) and C# 7.2, so the same file builds with mono's mcs (`mcs -unsafe`) and on .NET
// (netstandard2.1, net6.0 and later, with AllowUnsafeBlocks). CI builds and runs it with mono.
//
// Errors: a call that fails throws SoeException, which carries the status and the library's
// explanation (soe_last_error). The outcomes that are part of the normal flow come back as a
// Status instead: Done (nothing to take), ErrBufferTooSmall (a bigger buffer is needed; the
// item is kept) and ErrQueueFull (back-pressure).
//
// Threads: an Endpoint is used by one thread at a time, like the C endpoint it wraps.

using System;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Text;

namespace Soe
{
    /// <summary>What every call returns (soe_status). Zero and positive values are outcomes,
    /// negative values errors.</summary>
    public enum Status : int
    {
        Ok = 0,
        Done = 1,
        ErrNull = -1,
        ErrInvalidArgument = -2,
        ErrInvalidConfig = -3,
        ErrBufferTooSmall = -4,
        ErrStaleSession = -5,
        ErrMessageTooLarge = -6,
        ErrQueueFull = -7,
        ErrClosed = -8,
        ErrConnect = -9,
        ErrPanic = -10,
        ErrPoisoned = -11,
    }

    /// <summary>What an event is (soe_event_kind).</summary>
    public enum EventKind : uint
    {
        Accepted = 1,
        Connected = 2,
        Message = 3,
        Closed = 4,
    }

    /// <summary>How a message travelled (soe_delivery).</summary>
    public enum Delivery : uint
    {
        Reliable = 0,
        Unreliable = 1,
        Ordered = 2,
    }

    /// <summary>Disconnect reasons (SOE_REASON_*): what Close sends and Closed events carry.</summary>
    public static class Reason
    {
        public const ushort None = 0;
        public const ushort Timeout = 2;
        public const ushort ConnectFail = 5;
        public const ushort Application = 6;
        public const ushort UnacknowledgedTimeout = 8;
        public const ushort ConnectionRefused = 10;
        public const ushort ReliableOverflow = 13;
        public const ushort CorruptPacket = 15;
        public const ushort ProtocolMismatch = 16;
    }

    /// <summary>A failed call: its status and the library's explanation.</summary>
    public sealed class SoeException : Exception
    {
        public SoeException(Status status, string message)
            : base(Native.StatusName(status) + ": " + message)
        {
            Status = status;
        }

        /// <summary>The status the call returned.</summary>
        public Status Status { get; }
    }

    /// <summary>An event taken by PollEvent. A message's bytes are in the caller's buffer.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Event
    {
        public EventKind Kind;
        /// <summary>The session's handle; 0 is never one.</summary>
        public ulong Session;
        /// <summary>A message's reliable channel (0 to 3).</summary>
        public byte Channel;
        public Delivery Delivery;
        private UIntPtr len;
        /// <summary>Why a session closed (Reason).</summary>
        public ushort Reason;
        private byte byPeer;

        /// <summary>A message's length; with ErrBufferTooSmall, the buffer size needed.</summary>
        public int Length { get { return checked((int)len.ToUInt64()); } }

        /// <summary>Whether the peer ended the session.</summary>
        public bool ByPeer { get { return byPeer != 0; } }
    }

    /// <summary>A session's counters (soe_stats).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Stats
    {
        public ulong RttUs;
        public ulong DatagramsSent;
        public ulong DatagramsReceived;
        public ulong BytesSent;
        public ulong BytesReceived;
        public ulong CrcRejects;
        public ulong ReliableMessagesSent;
        public ulong ReliableMessagesReceived;
        public ulong ReliablePacketsSent;
        public ulong Resends;
        public ulong UnreliableSent;
        public ulong UnreliableReceived;
    }

    /// <summary>The settings of an endpoint. Null or zero fields keep the library's defaults
    /// (soe_config_init).</summary>
    public sealed class Options
    {
        /// <summary>Accept sessions (true) or only connect (false).</summary>
        public bool Server;
        /// <summary>The application protocol name; null: "SoeEcho".</summary>
        public string ApplicationProtocol;
        /// <summary>The RC4 key for reliable data (1 to 256 bytes); null: none.</summary>
        public byte[] Rc4Key;
        /// <summary>With a key: false starts sessions in plaintext until SetEncryption.</summary>
        public bool Rc4AtStart = true;
        public uint UdpLength;
        public uint MaxMessageSize;
        public uint MaxQueuedMessages;
        public uint MaxSessions;
    }

    /// <summary>The host's monotonic clock in microseconds, the time every call takes.</summary>
    public static class Clock
    {
        public static ulong NowUs()
        {
            long ticks = Stopwatch.GetTimestamp();
            long f = Stopwatch.Frequency;
            return (ulong)(ticks / f * 1000000 + ticks % f * 1000000 / f);
        }
    }

    /// <summary>The endpoint handle (soe_endpoint *): freed exactly once, by the runtime if the
    /// owner forgets.</summary>
    public sealed class EndpointHandle : SafeHandle
    {
        public EndpointHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        protected override bool ReleaseHandle()
        {
            Native.soe_endpoint_free(handle);
            return true;
        }
    }

    /// <summary>An SOE endpoint: the sessions behind one socket.</summary>
    public sealed unsafe class Endpoint : IDisposable
    {
        private readonly EndpointHandle handle;

        /// <summary>Creates an endpoint; nowUs is the host's clock now (Clock.NowUs()).</summary>
        public Endpoint(Options options, ulong nowUs)
        {
            Native.CheckAbi();
            Native.Config config;
            Check(Native.soe_config_init(out config, options.Server ? 1u : 2u));
            if (options.UdpLength != 0) config.UdpLength = options.UdpLength;
            if (options.MaxMessageSize != 0) config.MaxMessageSize = options.MaxMessageSize;
            if (options.MaxQueuedMessages != 0) config.MaxQueuedMessages = options.MaxQueuedMessages;
            if (options.MaxSessions != 0) config.MaxSessions = options.MaxSessions;
            config.Rc4AtStart = (byte)(options.Rc4AtStart ? 1 : 0);
            // The library copies the name and the key before soe_endpoint_new returns.
            byte[] protocol = options.ApplicationProtocol == null
                ? null
                : Encoding.UTF8.GetBytes(options.ApplicationProtocol + "\0");
            byte[] key = options.Rc4Key ?? new byte[0];
            fixed (byte* name = protocol)
            fixed (byte* k = key)
            {
                if (name != null) config.ApplicationProtocol = (IntPtr)name;
                config.Rc4Key = key.Length > 0 ? (IntPtr)k : IntPtr.Zero;
                config.Rc4KeyLen = (UIntPtr)key.Length;
                Check(Native.soe_endpoint_new(ref config, nowUs, out handle));
            }
        }

        /// <summary>Hands in one datagram received from `from`.</summary>
        public void HandleDatagram(ulong nowUs, IPEndPoint from, ReadOnlySpan<byte> datagram)
        {
            Native.Addr source = Native.Addr.From(from);
            fixed (byte* p = &MemoryMarshal.GetReference(datagram))
            {
                Check(Native.soe_endpoint_handle_datagram(
                    Ptr(), nowUs, ref source, p, (UIntPtr)datagram.Length));
            }
        }

        /// <summary>Takes the next datagram to send into `buffer`: Ok with its length and
        /// destination, or Done. A buffer of the configured udp_length always fits.</summary>
        public Status PollTransmit(ulong nowUs, Span<byte> buffer, out int length, out IPEndPoint to)
        {
            UIntPtr len;
            Native.Addr dest;
            Status s;
            fixed (byte* p = &MemoryMarshal.GetReference(buffer))
            {
                s = Native.soe_endpoint_poll_transmit(
                    Ptr(), nowUs, p, (UIntPtr)buffer.Length, out len, out dest);
            }
            length = s == Status.Ok ? (int)len.ToUInt64() : 0;
            to = s == Status.Ok ? dest.ToEndPoint() : null;
            if (s == Status.ErrBufferTooSmall)
            {
                throw new SoeException(s, Native.LastError());
            }
            return Expect(s, Status.Done);
        }

        /// <summary>Takes the next event; a message's bytes go to `buffer`. Ok, Done, or
        /// ErrBufferTooSmall with the size needed in ev.Length (the event is kept).</summary>
        public Status PollEvent(Span<byte> buffer, out Event ev)
        {
            Status s;
            fixed (byte* p = &MemoryMarshal.GetReference(buffer))
            {
                s = Native.soe_endpoint_poll_event(Ptr(), out ev, p, (UIntPtr)buffer.Length);
            }
            return Expect(s, Status.Done, Status.ErrBufferTooSmall);
        }

        /// <summary>The next deadline on the host's clock, or null when no timer runs.</summary>
        public ulong? NextTimeout()
        {
            ulong deadline;
            Status s = Expect(Native.soe_endpoint_next_timeout(Ptr(), out deadline), Status.Done);
            return s == Status.Ok ? deadline : (ulong?)null;
        }

        /// <summary>Runs the timers due at nowUs; an early call is harmless.</summary>
        public void HandleTimeout(ulong nowUs)
        {
            Check(Native.soe_endpoint_handle_timeout(Ptr(), nowUs));
        }

        /// <summary>Starts a session with the server at `to`; Connected (or Closed) follows.</summary>
        public ulong Connect(ulong nowUs, IPEndPoint to)
        {
            Native.Addr addr = Native.Addr.From(to);
            ulong session;
            Check(Native.soe_connect(Ptr(), nowUs, ref addr, out session));
            return session;
        }

        /// <summary>Queues a reliable message on `channel` (0 to 3); the bytes are copied. Ok,
        /// or ErrQueueFull (back-pressure: drive the loop and try again).</summary>
        public Status Send(ulong session, byte channel, ReadOnlySpan<byte> message)
        {
            fixed (byte* p = &MemoryMarshal.GetReference(message))
            {
                return Expect(
                    Native.soe_send(Ptr(), session, channel, p, (UIntPtr)message.Length),
                    Status.ErrQueueFull);
            }
        }

        /// <summary>Queues an unreliable message (one datagram at most, first byte not 0).</summary>
        public Status SendUnreliable(ulong session, ReadOnlySpan<byte> message)
        {
            fixed (byte* p = &MemoryMarshal.GetReference(message))
            {
                return Expect(
                    Native.soe_send_unreliable(Ptr(), session, p, (UIntPtr)message.Length),
                    Status.ErrQueueFull);
            }
        }

        /// <summary>Queues an ordered message: unreliable, never delivered after a newer one.</summary>
        public Status SendOrdered(ulong session, ReadOnlySpan<byte> message)
        {
            fixed (byte* p = &MemoryMarshal.GetReference(message))
            {
                return Expect(
                    Native.soe_send_ordered(Ptr(), session, p, (UIntPtr)message.Length),
                    Status.ErrQueueFull);
            }
        }

        /// <summary>How many more messages Send takes on `channel` now.</summary>
        public int SendCapacity(ulong session, byte channel)
        {
            UIntPtr capacity;
            Check(Native.soe_send_capacity(Ptr(), session, channel, out capacity));
            return (int)Math.Min(capacity.ToUInt64(), int.MaxValue);
        }

        /// <summary>Closes a session with `reason` (Reason.Application by default): what is
        /// queued is still delivered; a Closed event follows.</summary>
        public void Close(ulong nowUs, ulong session, ushort reason = Reason.Application)
        {
            Check(Native.soe_close(Ptr(), nowUs, session, reason));
        }

        /// <summary>Turns RC4 on or off for one session from now on (needs a key).</summary>
        public void SetEncryption(ulong session, bool on)
        {
            Check(Native.soe_set_encryption(Ptr(), session, (byte)(on ? 1 : 0)));
        }

        /// <summary>A session's counters.</summary>
        public Stats Stats(ulong session)
        {
            Stats stats;
            Check(Native.soe_session_stats(Ptr(), session, out stats));
            return stats;
        }

        /// <summary>The sessions the endpoint holds (half-open ones included).</summary>
        public int SessionCount
        {
            get
            {
                UIntPtr count;
                Check(Native.soe_endpoint_session_count(Ptr(), out count));
                return (int)count.ToUInt64();
            }
        }

        /// <summary>Frees the endpoint and its sessions (without telling the peers).</summary>
        public void Dispose()
        {
            handle.Dispose();
        }

        private IntPtr Ptr()
        {
            if (handle.IsClosed)
            {
                throw new ObjectDisposedException("Endpoint");
            }
            return handle.DangerousGetHandle();
        }

        private static void Check(Status s)
        {
            if (s != Status.Ok)
            {
                throw new SoeException(s, Native.LastError());
            }
        }

        /// <summary>Ok and the `allowed` outcomes come back; any other status throws.</summary>
        private static Status Expect(Status s, params Status[] allowed)
        {
            if (s == Status.Ok || Array.IndexOf(allowed, s) >= 0)
            {
                return s;
            }
            throw new SoeException(s, Native.LastError());
        }
    }

    /// <summary>The C functions, as soe.h declares them.</summary>
    public static unsafe class Native
    {
        /// <summary>The library's name: libsoe.so (the development link to libsoe.so.0), soe.dll.</summary>
        public const string Library = "soe";

        /// <summary>The ABI this binding was written against (SOE_ABI_VERSION).</summary>
        public const uint AbiVersion = 0;

        [StructLayout(LayoutKind.Sequential)]
        public struct Addr
        {
            public ushort Family;
            public ushort Port;
            public fixed byte Ip[16];
            public uint ScopeId;

            public static Addr From(IPEndPoint endpoint)
            {
                Addr a = new Addr();
                byte[] ip = endpoint.Address.GetAddressBytes();
                a.Family = endpoint.AddressFamily == AddressFamily.InterNetworkV6 ? (ushort)6 : (ushort)4;
                a.Port = (ushort)endpoint.Port;
                for (int i = 0; i < ip.Length && i < 16; i++)
                {
                    a.Ip[i] = ip[i];
                }
                if (a.Family == 6)
                {
                    a.ScopeId = (uint)endpoint.Address.ScopeId;
                }
                return a;
            }

            public IPEndPoint ToEndPoint()
            {
                byte[] ip = new byte[Family == 6 ? 16 : 4];
                fixed (byte* bytes = Ip)
                {
                    for (int i = 0; i < ip.Length; i++)
                    {
                        ip[i] = bytes[i];
                    }
                }
                IPAddress address = Family == 6 ? new IPAddress(ip, ScopeId) : new IPAddress(ip);
                return new IPEndPoint(address, Port);
            }
        }

        [StructLayout(LayoutKind.Sequential)]
        public struct Config
        {
            public uint Role;
            public IntPtr ApplicationProtocol;
            public uint UdpLength;
            public byte CrcLength;
            public byte Compression;
            public IntPtr Rc4Key;
            public UIntPtr Rc4KeyLen;
            public byte Rc4AtStart;
            public uint MaxSessions;
            public uint MaxHalfOpen;
            public uint MaxMessageSize;
            public uint MaxQueuedMessages;
            public uint IdleTimeoutMs;
            public uint ConnectTimeoutMs;
            public uint HeartbeatIntervalMs;
        }

        [DllImport(Library)] public static extern Status soe_config_init(out Config config, uint role);
        [DllImport(Library)] public static extern Status soe_endpoint_new(ref Config config, ulong nowUs, out EndpointHandle ep);
        [DllImport(Library)] public static extern void soe_endpoint_free(IntPtr ep);
        [DllImport(Library)] public static extern Status soe_endpoint_handle_datagram(IntPtr ep, ulong nowUs, ref Addr from, byte* data, UIntPtr len);
        [DllImport(Library)] public static extern Status soe_endpoint_poll_transmit(IntPtr ep, ulong nowUs, byte* buf, UIntPtr cap, out UIntPtr len, out Addr to);
        [DllImport(Library)] public static extern Status soe_endpoint_poll_event(IntPtr ep, out Event ev, byte* buf, UIntPtr cap);
        [DllImport(Library)] public static extern Status soe_endpoint_next_timeout(IntPtr ep, out ulong deadlineUs);
        [DllImport(Library)] public static extern Status soe_endpoint_handle_timeout(IntPtr ep, ulong nowUs);
        [DllImport(Library)] public static extern Status soe_connect(IntPtr ep, ulong nowUs, ref Addr to, out ulong session);
        [DllImport(Library)] public static extern Status soe_send(IntPtr ep, ulong session, byte channel, byte* data, UIntPtr len);
        [DllImport(Library)] public static extern Status soe_send_unreliable(IntPtr ep, ulong session, byte* data, UIntPtr len);
        [DllImport(Library)] public static extern Status soe_send_ordered(IntPtr ep, ulong session, byte* data, UIntPtr len);
        [DllImport(Library)] public static extern Status soe_send_capacity(IntPtr ep, ulong session, byte channel, out UIntPtr capacity);
        [DllImport(Library)] public static extern Status soe_close(IntPtr ep, ulong nowUs, ulong session, ushort reason);
        [DllImport(Library)] public static extern Status soe_set_encryption(IntPtr ep, ulong session, byte on);
        [DllImport(Library)] public static extern Status soe_session_stats(IntPtr ep, ulong session, out Stats stats);
        [DllImport(Library)] public static extern Status soe_endpoint_session_count(IntPtr ep, out UIntPtr count);
        [DllImport(Library)] public static extern IntPtr soe_last_error();
        [DllImport(Library)] public static extern IntPtr soe_status_name(int status);
        [DllImport(Library)] public static extern IntPtr soe_version();
        [DllImport(Library)] public static extern uint soe_abi_version();

        /// <summary>The calling thread's latest error message.</summary>
        public static string LastError()
        {
            return Utf8(soe_last_error());
        }

        /// <summary>A status's constant name ("SOE_ERR_QUEUE_FULL").</summary>
        public static string StatusName(Status s)
        {
            return Utf8(soe_status_name((int)s));
        }

        /// <summary>The loaded library's version ("0.2.0").</summary>
        public static string Version()
        {
            return Utf8(soe_version());
        }

        /// <summary>Throws when the loaded library's ABI is not the one this binding knows.</summary>
        public static void CheckAbi()
        {
            uint loaded = soe_abi_version();
            if (loaded != AbiVersion)
            {
                throw new InvalidOperationException(
                    "libsoe has ABI " + loaded + "; this binding was written for ABI " + AbiVersion);
            }
        }

        private static string Utf8(IntPtr p)
        {
            if (p == IntPtr.Zero)
            {
                return "";
            }
            byte* s = (byte*)p;
            int n = 0;
            while (s[n] != 0)
            {
                n++;
            }
            return Encoding.UTF8.GetString(s, n);
        }
    }
}
