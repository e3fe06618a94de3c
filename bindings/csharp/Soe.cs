// Soe.cs: a C# binding of the SOE protocol endpoint's C library (soe.h, libsoe.so.1).
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
// Threads: an Endpoint is used by one thread at a time, like the C endpoint it wraps. Every
// native call takes the SafeHandle itself, so the runtime holds a reference for the call's
// length: a Dispose on another thread waits for the call to end before the endpoint is freed.
//
// Nullable: the file has no null reference anywhere in its public surface (optional settings
// are nullable value types; "no key" is an empty array), so a .NET project with
// <Nullable>enable</Nullable> (Soe.csproj) compiles it without a warning. It carries no
// `#nullable` directive or `string?`, which mono's mcs rejects.

using System;
using System.Collections.Generic;
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
        /// <summary>Done (SOE_OK).</summary>
        Ok = 0,
        /// <summary>Nothing to take: no datagram, event or deadline (SOE_DONE).</summary>
        Done = 1,
        /// <summary>A required pointer was null (SOE_ERR_NULL).</summary>
        ErrNull = -1,
        /// <summary>An argument is out of range (SOE_ERR_INVALID_ARGUMENT).</summary>
        ErrInvalidArgument = -2,
        /// <summary>An option is out of range, or options do not fit together
        /// (SOE_ERR_INVALID_CONFIG).</summary>
        ErrInvalidConfig = -3,
        /// <summary>The buffer is too small; the size needed was reported and the item is kept
        /// (SOE_ERR_BUFFER_TOO_SMALL).</summary>
        ErrBufferTooSmall = -4,
        /// <summary>The session handle names no session (SOE_ERR_STALE_SESSION).</summary>
        ErrStaleSession = -5,
        /// <summary>The message is too long, or an unreliable one is empty or starts with 0
        /// (SOE_ERR_MESSAGE_TOO_LARGE).</summary>
        ErrMessageTooLarge = -6,
        /// <summary>Back-pressure: the send queue is full (SOE_ERR_QUEUE_FULL).</summary>
        ErrQueueFull = -7,
        /// <summary>The session is closing (SOE_ERR_CLOSED).</summary>
        ErrClosed = -8,
        /// <summary>A session could not be started (SOE_ERR_CONNECT).</summary>
        ErrConnect = -9,
        /// <summary>A bug in the library was caught; the endpoint is poisoned (SOE_ERR_PANIC).</summary>
        ErrPanic = -10,
        /// <summary>The endpoint panicked before (SOE_ERR_POISONED).</summary>
        ErrPoisoned = -11,
        /// <summary>An option the loaded library does not know (SOE_ERR_UNKNOWN_OPTION).</summary>
        ErrUnknownOption = -12,
        /// <summary>The operating system's random generator failed, so no endpoint was made: its
        /// secret and session ids come from it and from nothing weaker (SOE_ERR_RANDOM). The
        /// Endpoint constructor throws SoeException with it.</summary>
        ErrRandom = -13,
    }

    /// <summary>What an event is (soe_event_kind).</summary>
    public enum EventKind : uint
    {
        /// <summary>Server side: a client completed its handshake.</summary>
        Accepted = 1,
        /// <summary>Client side: the server answered.</summary>
        Connected = 2,
        /// <summary>A message: its bytes are in the caller's buffer.</summary>
        Message = 3,
        /// <summary>The session ended; its handle is no longer valid.</summary>
        Closed = 4,
    }

    /// <summary>How a message travelled (soe_delivery).</summary>
    public enum Delivery : uint
    {
        /// <summary>Reliable, in order, on its channel.</summary>
        Reliable = 0,
        /// <summary>Unreliable: at most once, any order.</summary>
        Unreliable = 1,
        /// <summary>Ordered: at most once, never older than one delivered before.</summary>
        Ordered = 2,
    }

    /// <summary>Disconnect reasons (SOE_REASON_*): what Close sends and Closed events carry.
    /// A peer may send a code above 16, which has no name.</summary>
    public enum Reason : ushort
    {
        /// <summary>None given.</summary>
        None = 0,
        /// <summary>An ICMP error.</summary>
        IcmpError = 1,
        /// <summary>The peer was silent for the idle timeout.</summary>
        Timeout = 2,
        /// <summary>The other side terminated.</summary>
        OtherSideTerminated = 3,
        /// <summary>The manager (endpoint) was deleted.</summary>
        ManagerDeleted = 4,
        /// <summary>The handshake failed.</summary>
        ConnectFail = 5,
        /// <summary>The application closed the session (the usual one).</summary>
        Application = 6,
        /// <summary>The peer is unreachable.</summary>
        UnreachableConnection = 7,
        /// <summary>Reliable data went unacknowledged too long.</summary>
        UnacknowledgedTimeout = 8,
        /// <summary>A new connection attempt replaced the session.</summary>
        NewConnectionAttempt = 9,
        /// <summary>The server refused the session.</summary>
        ConnectionRefused = 10,
        /// <summary>A connection error.</summary>
        ConnectError = 11,
        /// <summary>The session would connect to itself.</summary>
        ConnectingToSelf = 12,
        /// <summary>The receiver's reliable buffers overflowed.</summary>
        ReliableOverflow = 13,
        /// <summary>The application released the session.</summary>
        ApplicationReleased = 14,
        /// <summary>A corrupt packet.</summary>
        CorruptPacket = 15,
        /// <summary>The application protocols differ.</summary>
        ProtocolMismatch = 16,
    }

    /// <summary>The numeric options of soe_config_set (SOE_OPT_*); Options sets them.</summary>
    public enum Option : uint
    {
        /// <summary>SOE_OPT_UDP_LENGTH.</summary>
        UdpLength = 1,
        /// <summary>SOE_OPT_CRC_LENGTH.</summary>
        CrcLength = 2,
        /// <summary>SOE_OPT_COMPRESSION.</summary>
        Compression = 3,
        /// <summary>SOE_OPT_RC4_AT_START.</summary>
        Rc4AtStart = 4,
        /// <summary>SOE_OPT_MAX_SESSIONS.</summary>
        MaxSessions = 5,
        /// <summary>SOE_OPT_MAX_HALF_OPEN.</summary>
        MaxHalfOpen = 6,
        /// <summary>SOE_OPT_MAX_MESSAGE_SIZE.</summary>
        MaxMessageSize = 7,
        /// <summary>SOE_OPT_MAX_QUEUED_MESSAGES.</summary>
        MaxQueuedMessages = 8,
        /// <summary>SOE_OPT_MAX_QUEUED_UNRELIABLE.</summary>
        MaxQueuedUnreliable = 9,
        /// <summary>SOE_OPT_IDLE_TIMEOUT_MS.</summary>
        IdleTimeout = 10,
        /// <summary>SOE_OPT_CONNECT_TIMEOUT_MS.</summary>
        ConnectTimeout = 11,
        /// <summary>SOE_OPT_HEARTBEAT_INTERVAL_MS.</summary>
        HeartbeatInterval = 12,
        /// <summary>SOE_OPT_CLOSE_TIMEOUT_MS.</summary>
        CloseTimeout = 13,
        /// <summary>SOE_OPT_DISCONNECT_REPEATS.</summary>
        DisconnectRepeats = 14,
        /// <summary>SOE_OPT_DISCONNECT_INTERVAL_MS.</summary>
        DisconnectInterval = 15,
        /// <summary>SOE_OPT_BUNDLE_MESSAGES.</summary>
        BundleMessages = 16,
        /// <summary>SOE_OPT_MAX_OUTSTANDING_BYTES.</summary>
        MaxOutstandingBytes = 17,
        /// <summary>SOE_OPT_PRESET.</summary>
        Preset = 18,
        /// <summary>SOE_OPT_RECORD_SESSIONS.</summary>
        RecordSessions = 19,
        /// <summary>SOE_OPT_RECORD_SESSION_BYTES.</summary>
        RecordSessionBytes = 20,
        /// <summary>SOE_OPT_RECORD_ENDPOINT_BYTES.</summary>
        RecordEndpointBytes = 21,
    }

    /// <summary>A known peer's settings (SOE_PRESET_*; docs/interop.md gives their sources).</summary>
    public enum Preset : long
    {
        /// <summary>SOE_PRESET_NONE: the defaults.</summary>
        None = 0,
        /// <summary>SOE_PRESET_FREE_REALMS: a server for the Free Realms client.</summary>
        FreeRealms = 1,
        /// <summary>SOE_PRESET_OSFR_LIBSOE: a client of OSFR's LibSOE server.</summary>
        OsfrLibSoe = 2,
        /// <summary>SOE_PRESET_H1Z1: the H1Z1 gateway, as h1z1-server runs it.</summary>
        H1z1 = 3,
        /// <summary>SOE_PRESET_PLANETSIDE2: a server for the PlanetSide 2 client.</summary>
        PlanetSide2 = 4,
    }

    /// <summary>A failed call: its status and the library's explanation.</summary>
    public sealed class SoeException : Exception
    {
        /// <summary>An exception for `status` with the library's `message`.</summary>
        public SoeException(Status status, string message)
            : base(Native.StatusName(status) + ": " + message)
        {
            Status = status;
        }

        /// <summary>The status the call returned.</summary>
        public Status Status { get; }
    }

    /// <summary>An event taken by PollEvent (soe_event). A message's bytes are in the caller's
    /// buffer.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Event
    {
        /// <summary>What happened.</summary>
        public EventKind Kind;
        /// <summary>The session's handle; 0 is never one.</summary>
        public ulong Session;
        /// <summary>A message's reliable channel (0 to 3).</summary>
        public byte Channel;
        /// <summary>How a message travelled.</summary>
        public Delivery Delivery;
        private UIntPtr len;
        /// <summary>Why a session closed.</summary>
        public Reason Reason;
        private byte byPeer;
        /// <summary>The session's user value (Endpoint.SetUser), in every event of the session,
        /// the Closed one included.</summary>
        public IntPtr User;

        /// <summary>A message's length; with ErrBufferTooSmall, the buffer size needed.</summary>
        public int Length { get { return checked((int)len.ToUInt64()); } }

        /// <summary>Whether the peer ended the session.</summary>
        public bool ByPeer { get { return byPeer != 0; } }
    }

    /// <summary>A session's counters (soe_stats).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Stats
    {
        /// <summary>The smoothed round trip in microseconds; 0 before the first sample.</summary>
        public ulong RttUs;
        /// <summary>Datagrams sent.</summary>
        public ulong DatagramsSent;
        /// <summary>Datagrams received and accepted.</summary>
        public ulong DatagramsReceived;
        /// <summary>Bytes sent, framing included.</summary>
        public ulong BytesSent;
        /// <summary>Bytes of accepted datagrams.</summary>
        public ulong BytesReceived;
        /// <summary>Datagrams dropped for a bad CRC.</summary>
        public ulong CrcRejects;
        /// <summary>Reliable messages accepted by Send.</summary>
        public ulong ReliableMessagesSent;
        /// <summary>Reliable messages delivered.</summary>
        public ulong ReliableMessagesReceived;
        /// <summary>Reliable packets sent for the first time.</summary>
        public ulong ReliablePacketsSent;
        /// <summary>Reliable packets sent again.</summary>
        public ulong Resends;
        /// <summary>Unreliable and ordered messages sent.</summary>
        public ulong UnreliableSent;
        /// <summary>Unreliable and ordered messages delivered.</summary>
        public ulong UnreliableReceived;
    }

    /// <summary>The settings of an endpoint: one property per option of the C library. A
    /// property left null keeps the library's default (docs/c-api.md lists them); a duration
    /// set to Options.Never turns an optional timer off.</summary>
    public sealed class Options
    {
        /// <summary>The value of IdleTimeout and HeartbeatInterval that never fires
        /// (System.Threading.Timeout.InfiniteTimeSpan, SOE_NEVER).</summary>
        public static readonly TimeSpan Never = System.Threading.Timeout.InfiniteTimeSpan;

        /// <summary>Accept sessions (true) or only connect (false, the default).</summary>
        public bool Server { get; set; }
        /// <summary>The application protocol name, both sides the same. Default "SoeEcho".</summary>
        public string ApplicationProtocol { get; set; } = "SoeEcho";
        /// <summary>The RC4 key for reliable data (1 to 256 bytes); empty (the default): none.</summary>
        public byte[] Rc4Key { get; set; } = new byte[0];
        /// <summary>With a key: false starts sessions in plaintext until SetEncryption. Default true.</summary>
        public bool? Rc4AtStart { get; set; }
        /// <summary>The largest datagram, 64 to 65507. Default 512.</summary>
        public int? UdpLength { get; set; }
        /// <summary>The CRC trailer a server announces: 0, 2 or 4 bytes. Default 2.</summary>
        public int? CrcLength { get; set; }
        /// <summary>Whether a server announces compression. Default false.</summary>
        public bool? Compression { get; set; }
        /// <summary>The most sessions. Default 10000.</summary>
        public int? MaxSessions { get; set; }
        /// <summary>The most half-open sessions. Default 1024.</summary>
        public int? MaxHalfOpen { get; set; }
        /// <summary>The longest reliable message, 1 to 4194304 bytes. Default 4194304.</summary>
        public int? MaxMessageSize { get; set; }
        /// <summary>Messages queued per reliable channel before ErrQueueFull. Default 4096.</summary>
        public int? MaxQueuedMessages { get; set; }
        /// <summary>Unreliable messages queued per session before ErrQueueFull. Default 256.</summary>
        public int? MaxQueuedUnreliable { get; set; }
        /// <summary>A silent peer's session ends after this long; Never: never. Default 30 s.</summary>
        public TimeSpan? IdleTimeout { get; set; }
        /// <summary>How long a client waits for the server's answer. Default 10 s.</summary>
        public TimeSpan? ConnectTimeout { get; set; }
        /// <summary>A client's Heartbeat after this long without hearing the peer; Never: none.
        /// Default 10 s.</summary>
        public TimeSpan? HeartbeatInterval { get; set; }
        /// <summary>How long Close lingers for queued data before the Disconnect. Default 5 s.</summary>
        public TimeSpan? CloseTimeout { get; set; }
        /// <summary>How many times the Disconnect is sent, 1 to 16. Default 5.</summary>
        public int? DisconnectRepeats { get; set; }
        /// <summary>The spacing of the repeated Disconnects. Default 100 ms.</summary>
        public TimeSpan? DisconnectInterval { get; set; }
        /// <summary>Whether small reliable messages share one reliable packet. Default true.</summary>
        public bool? BundleMessages { get; set; }
        /// <summary>The most bytes in flight per reliable channel, beside the packet window.
        /// Default 204800 (200 KiB); the Free Realms client needs 65536.</summary>
        public int? MaxOutstandingBytes { get; set; }
        /// <summary>A known peer's settings (Preset.FreeRealms...), applied before every other
        /// property here, so that those override it. Default: none.</summary>
        public Preset? Preset { get; set; }
        /// <summary>Whether the flight recorder records every session (a server's from its
        /// first valid packet); Endpoint.SetRecording names one. Default false.</summary>
        public bool? RecordSessions { get; set; }
        /// <summary>The most bytes one session's recording holds, half each way, 8192 to
        /// 4294967295. Default 65536.</summary>
        public long? RecordSessionBytes { get; set; }
        /// <summary>The most bytes the endpoint's recordings hold together, 8192 to
        /// 4294967295. Default 67108864.</summary>
        public long? RecordEndpointBytes { get; set; }
    }

    /// <summary>The host's monotonic clock in microseconds, the time every call takes.</summary>
    public static class Clock
    {
        /// <summary>Now, in microseconds (Stopwatch).</summary>
        public static ulong NowUs()
        {
            long ticks = Stopwatch.GetTimestamp();
            long f = Stopwatch.Frequency;
            return (ulong)(ticks / f * 1000000 + ticks % f * 1000000 / f);
        }
    }

    /// <summary>The endpoint handle (soe_endpoint *): freed exactly once, by the runtime if the
    /// owner forgets, and never during a call that uses it.</summary>
    public sealed class EndpointHandle : SafeHandle
    {
        /// <summary>An invalid handle, for the marshaller to fill.</summary>
        public EndpointHandle() : base(IntPtr.Zero, true) { }

        /// <summary>Whether the handle holds no endpoint.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        /// <summary>Frees the endpoint (soe_endpoint_free).</summary>
        protected override bool ReleaseHandle()
        {
            Native.soe_endpoint_free(handle);
            return true;
        }
    }

    /// <summary>A config handle (soe_config *), freed exactly once.</summary>
    public sealed class ConfigHandle : SafeHandle
    {
        /// <summary>An invalid handle, for the marshaller to fill.</summary>
        public ConfigHandle() : base(IntPtr.Zero, true) { }

        /// <summary>Whether the handle holds no config.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        /// <summary>Frees the config (soe_config_free).</summary>
        protected override bool ReleaseHandle()
        {
            Native.soe_config_free(handle);
            return true;
        }
    }

    /// <summary>An SOE endpoint: the sessions behind one socket.</summary>
    public sealed unsafe class Endpoint : IDisposable
    {
        private readonly EndpointHandle handle;
        /// <summary>Destinations handed out lately, so that PollTransmit gives the same
        /// IPEndPoint for the same address instead of a new one per datagram: the current
        /// generation and the one before. A destination used in either stays; one-off ones (a
        /// spoofed flood's replies) age out, and the live sessions' destinations with them
        /// never.</summary>
        private Dictionary<Native.Addr, IPEndPoint> destinations =
            new Dictionary<Native.Addr, IPEndPoint>();
        private Dictionary<Native.Addr, IPEndPoint> olderDestinations =
            new Dictionary<Native.Addr, IPEndPoint>();
        /// <summary>Destinations per generation of the cache.</summary>
        internal const int DestinationGeneration = 32768;

        /// <summary>Creates an endpoint; nowUs is the host's clock now (Clock.NowUs()).</summary>
        public Endpoint(Options options, ulong nowUs)
        {
            Native.CheckAbi();
            ConfigHandle config;
            Check(Native.soe_config_new(options.Server ? 1u : 2u, out config));
            using (config)
            {
                Configure(config, options);
                Check(Native.soe_endpoint_new(config, nowUs, out handle));
            }
        }

        private static void Configure(ConfigHandle c, Options o)
        {
            // A null from code without nullable checks keeps the defaults rather than throwing.
            byte[] name = Encoding.UTF8.GetBytes((o.ApplicationProtocol ?? "SoeEcho") + "\0");
            byte[] key = o.Rc4Key ?? new byte[0];
            fixed (byte* p = name)
            {
                Check(Native.soe_config_set_application_protocol(c, p));
            }
            if (key.Length > 0)
            {
                fixed (byte* k = key)
                {
                    Check(Native.soe_config_set_rc4_key(c, k, (UIntPtr)key.Length));
                }
            }
            Set(c, Option.Preset, o.Preset.HasValue ? (long)o.Preset.Value : (long?)null);
            Set(c, Option.Rc4AtStart, Flag(o.Rc4AtStart));
            Set(c, Option.UdpLength, o.UdpLength);
            Set(c, Option.CrcLength, o.CrcLength);
            Set(c, Option.Compression, Flag(o.Compression));
            Set(c, Option.MaxSessions, o.MaxSessions);
            Set(c, Option.MaxHalfOpen, o.MaxHalfOpen);
            Set(c, Option.MaxMessageSize, o.MaxMessageSize);
            Set(c, Option.MaxQueuedMessages, o.MaxQueuedMessages);
            Set(c, Option.MaxQueuedUnreliable, o.MaxQueuedUnreliable);
            Set(c, Option.IdleTimeout, Ms(o.IdleTimeout));
            Set(c, Option.ConnectTimeout, Ms(o.ConnectTimeout));
            Set(c, Option.HeartbeatInterval, Ms(o.HeartbeatInterval));
            Set(c, Option.CloseTimeout, Ms(o.CloseTimeout));
            Set(c, Option.DisconnectRepeats, o.DisconnectRepeats);
            Set(c, Option.DisconnectInterval, Ms(o.DisconnectInterval));
            Set(c, Option.BundleMessages, Flag(o.BundleMessages));
            Set(c, Option.MaxOutstandingBytes, o.MaxOutstandingBytes);
            Set(c, Option.RecordSessions, Flag(o.RecordSessions));
            Set(c, Option.RecordSessionBytes, o.RecordSessionBytes);
            Set(c, Option.RecordEndpointBytes, o.RecordEndpointBytes);
        }

        private static void Set(ConfigHandle c, Option option, long? value)
        {
            if (value.HasValue)
            {
                Check(Native.soe_config_set(c, option, value.Value));
            }
        }

        private static long? Flag(bool? on)
        {
            return on.HasValue ? (on.Value ? 1 : 0) : (long?)null;
        }

        /// <summary>A duration in whole milliseconds; Options.Never is SOE_NEVER (-1). Any
        /// other negative duration is refused: truncated, one between -1 and -2 ms would read
        /// as SOE_NEVER.</summary>
        internal static long? Ms(TimeSpan? d)
        {
            if (!d.HasValue) return null;
            if (d.Value == Options.Never) return -1;
            if (d.Value < TimeSpan.Zero)
            {
                throw new ArgumentOutOfRangeException(
                    "d", d.Value, "a duration must not be negative (Options.Never turns a timer off)");
            }
            return (long)d.Value.TotalMilliseconds;
        }

        /// <summary>Hands in one datagram received from `from`.</summary>
        public void HandleDatagram(ulong nowUs, IPEndPoint from, ReadOnlySpan<byte> datagram)
        {
            Native.Addr source = Native.Addr.From(from);
            fixed (byte* p = &MemoryMarshal.GetReference(datagram))
            {
                Check(Native.soe_endpoint_handle_datagram(
                    Live(), nowUs, ref source, p, (UIntPtr)datagram.Length));
            }
        }

        /// <summary>Takes the next datagram to send into `buffer`: Ok with its length and
        /// destination; Done when there is none; ErrBufferTooSmall with the size needed in
        /// `length` (the datagram is kept for the next call; a buffer of the configured
        /// UdpLength always fits); `to` is null unless Ok. The same address comes back as the same
        /// IPEndPoint, without allocating, as long as it was a destination within the last
        /// 32,768 to 65,536 distinct ones (a live session's always is, whatever a flood of
        /// one-off destinations does); a new destination costs one IPEndPoint. An IPEndPoint a
        /// caller changed is the caller's: later datagrams get a new one.</summary>
        public Status PollTransmit(ulong nowUs, Span<byte> buffer, out int length, out IPEndPoint to)
        {
            UIntPtr len;
            Native.Addr dest;
            Status s;
            fixed (byte* p = &MemoryMarshal.GetReference(buffer))
            {
                s = Native.soe_endpoint_poll_transmit(
                    Live(), nowUs, p, (UIntPtr)buffer.Length, out len, out dest);
            }
            length = s == Status.Ok || s == Status.ErrBufferTooSmall ? (int)len.ToUInt64() : 0;
            to = s == Status.Ok ? Destination(dest) : null;
            return Expect(s, Status.Done, Status.ErrBufferTooSmall);
        }

        /// <summary>The IPEndPoint for `a`: the one handed out before when it still says `a`
        /// (a caller may have changed it; then it is the caller's, and a new one goes out), else
        /// a new one, kept for next time.</summary>
        private IPEndPoint Destination(Native.Addr a)
        {
            IPEndPoint known;
            if (destinations.TryGetValue(a, out known) && Native.Addr.From(known).Equals(a))
            {
                return known;
            }
            if (!olderDestinations.TryGetValue(a, out known) || !Native.Addr.From(known).Equals(a))
            {
                known = a.ToEndPoint();
            }
            if (destinations.Count >= DestinationGeneration)
            {
                // A new generation: what was not used during the last one is forgotten.
                Dictionary<Native.Addr, IPEndPoint> older = olderDestinations;
                older.Clear();
                olderDestinations = destinations;
                destinations = older;
            }
            destinations[a] = known;
            return known;
        }

        /// <summary>Takes the next event; a message's bytes go to `buffer`. Ok, Done, or
        /// ErrBufferTooSmall with the size needed in ev.Length (the event is kept).</summary>
        public Status PollEvent(Span<byte> buffer, out Event ev)
        {
            Status s;
            fixed (byte* p = &MemoryMarshal.GetReference(buffer))
            {
                s = Native.soe_endpoint_poll_event(Live(), out ev, p, (UIntPtr)buffer.Length);
            }
            return Expect(s, Status.Done, Status.ErrBufferTooSmall);
        }

        /// <summary>The next deadline on the host's clock, or null when no timer runs.</summary>
        public ulong? NextTimeout()
        {
            ulong deadline;
            Status s = Expect(Native.soe_endpoint_next_timeout(Live(), out deadline), Status.Done, Status.Done);
            return s == Status.Ok ? deadline : (ulong?)null;
        }

        /// <summary>Runs the timers due at nowUs; an early call is harmless.</summary>
        public void HandleTimeout(ulong nowUs)
        {
            Check(Native.soe_endpoint_handle_timeout(Live(), nowUs));
        }

        /// <summary>Starts a session with the server at `to`; Connected (or Closed) follows.</summary>
        public ulong Connect(ulong nowUs, IPEndPoint to)
        {
            Native.Addr addr = Native.Addr.From(to);
            ulong session;
            Check(Native.soe_connect(Live(), nowUs, ref addr, out session));
            return session;
        }

        /// <summary>Queues a reliable message on `channel` (0 to 3); the bytes are copied. Ok,
        /// or ErrQueueFull (back-pressure: drive the loop and try again).</summary>
        public Status Send(ulong session, byte channel, ReadOnlySpan<byte> message)
        {
            fixed (byte* p = &MemoryMarshal.GetReference(message))
            {
                return Expect(
                    Native.soe_send(Live(), session, channel, p, (UIntPtr)message.Length),
                    Status.ErrQueueFull, Status.ErrQueueFull);
            }
        }

        /// <summary>Queues an unreliable message (one datagram at most, first byte not 0).</summary>
        public Status SendUnreliable(ulong session, ReadOnlySpan<byte> message)
        {
            fixed (byte* p = &MemoryMarshal.GetReference(message))
            {
                return Expect(
                    Native.soe_send_unreliable(Live(), session, p, (UIntPtr)message.Length),
                    Status.ErrQueueFull, Status.ErrQueueFull);
            }
        }

        /// <summary>Queues an ordered message: unreliable, never delivered after a newer one.</summary>
        public Status SendOrdered(ulong session, ReadOnlySpan<byte> message)
        {
            fixed (byte* p = &MemoryMarshal.GetReference(message))
            {
                return Expect(
                    Native.soe_send_ordered(Live(), session, p, (UIntPtr)message.Length),
                    Status.ErrQueueFull, Status.ErrQueueFull);
            }
        }

        /// <summary>How many more messages Send takes on `channel` now.</summary>
        public int SendCapacity(ulong session, byte channel)
        {
            UIntPtr capacity;
            Check(Native.soe_send_capacity(Live(), session, channel, out capacity));
            return (int)Math.Min(capacity.ToUInt64(), int.MaxValue);
        }

        /// <summary>Closes a session gracefully with `reason`: what is queued is still
        /// delivered (for up to Options.CloseTimeout), then the Disconnects; Closed follows.</summary>
        public void Close(ulong nowUs, ulong session, Reason reason = Reason.Application)
        {
            Check(Native.soe_close(Live(), nowUs, session, (ushort)reason));
        }

        /// <summary>Closes a session at once: queued data is dropped, the Disconnects start now.</summary>
        public void CloseImmediately(ulong nowUs, ulong session, Reason reason = Reason.Application)
        {
            Check(Native.soe_close_immediately(Live(), nowUs, session, (ushort)reason));
        }

        /// <summary>Closes every session (a shutdown), gracefully or at once; then drive the
        /// loop until SessionCount is 0 before Dispose.</summary>
        public void CloseAll(ulong nowUs, Reason reason = Reason.Application, bool immediately = false)
        {
            Check(Native.soe_close_all(Live(), nowUs, (ushort)reason, (byte)(immediately ? 1 : 0)));
        }

        /// <summary>Attaches a value to a session, which every later event of the session
        /// carries in Event.User (a GCHandle's IntPtr, an index...); the library never reads it.</summary>
        public void SetUser(ulong session, IntPtr user)
        {
            Check(Native.soe_session_set_user(Live(), session, user));
        }

        /// <summary>The value SetUser attached to a session (IntPtr.Zero until then).</summary>
        public IntPtr User(ulong session)
        {
            IntPtr user;
            Check(Native.soe_session_user(Live(), session, out user));
            return user;
        }

        /// <summary>Turns RC4 on or off for one session from now on (needs a key).</summary>
        public void SetEncryption(ulong session, bool on)
        {
            Check(Native.soe_set_encryption(Live(), session, (byte)(on ? 1 : 0)));
        }

        /// <summary>Starts or stops recording one session with the flight recorder (stopping
        /// forgets what was recorded).</summary>
        public void SetRecording(ulong session, bool on)
        {
            Check(Native.soe_session_set_recording(Live(), session, on ? 1 : 0));
        }

        /// <summary>A session's recording as a pcapng capture (Wireshark with the soe.lua
        /// plugin opens it; `soe decode` reads it): a live session's so far, or, right after its
        /// Closed event, the whole recording of a session that ended abnormally, once. `local`
        /// is the endpoint's socket address. Null when there is none (not recorded, taken, or
        /// the session ended cleanly). The RC4 key is written only with `withKey`. One
        /// allocation, the capture: call it when a session ends, not per datagram.</summary>
        public byte[] TakeRecording(ulong session, ulong nowUs, IPEndPoint local, bool withKey = false)
        {
            Native.Addr at = Native.Addr.From(local);
            uint flags = withKey ? Native.RecordingWithKey : 0u;
            UIntPtr len;
            Status s = Native.soe_session_recording(Live(), session, nowUs, ref at, flags, null, UIntPtr.Zero, out len);
            if (s == Status.Done || s == Status.ErrStaleSession) return null;
            if (s != Status.ErrBufferTooSmall) Check(s);
            byte[] capture = new byte[checked((int)len.ToUInt64())];
            fixed (byte* p = capture)
            {
                Check(Native.soe_session_recording(Live(), session, nowUs, ref at, flags, p, (UIntPtr)capture.Length, out len));
            }
            return capture;
        }

        /// <summary>TakeRecording to a file: false when there is no recording.</summary>
        public bool WriteRecording(ulong session, ulong nowUs, IPEndPoint local, string path, bool withKey = false)
        {
            Native.Addr at = Native.Addr.From(local);
            uint flags = withKey ? Native.RecordingWithKey : 0u;
            byte[] name = Encoding.UTF8.GetBytes(path + "\0");
            fixed (byte* p = name)
            {
                Status s = Native.soe_session_recording_file(Live(), session, nowUs, ref at, flags, p);
                if (s == Status.Done || s == Status.ErrStaleSession) return false;
                Check(s);
                return true;
            }
        }

        /// <summary>A session's counters.</summary>
        public Stats Stats(ulong session)
        {
            Stats stats;
            Check(Native.soe_session_stats(Live(), session, out stats));
            return stats;
        }

        /// <summary>The sessions the endpoint holds (half-open and closing ones included).</summary>
        public int SessionCount
        {
            get
            {
                UIntPtr count;
                Check(Native.soe_endpoint_session_count(Live(), out count));
                return (int)count.ToUInt64();
            }
        }

        /// <summary>Frees the endpoint and its sessions (without telling the peers: CloseAll
        /// and drive the loop first). A call running on another thread finishes first.</summary>
        public void Dispose()
        {
            handle.Dispose();
        }

        /// <summary>The handle, for a call: the marshaller holds a reference to it for the
        /// call's length.</summary>
        private EndpointHandle Live()
        {
            if (handle.IsClosed)
            {
                throw new ObjectDisposedException("Endpoint");
            }
            return handle;
        }

        private static void Check(Status s)
        {
            if (s != Status.Ok)
            {
                throw new SoeException(s, Native.LastError());
            }
        }

        /// <summary>Ok and the two outcomes `a` and `b` come back; any other status throws.
        /// (Two parameters, not a params array: no allocation per call.)</summary>
        private static Status Expect(Status s, Status a, Status b)
        {
            if (s == Status.Ok || s == a || s == b)
            {
                return s;
            }
            throw new SoeException(s, Native.LastError());
        }
    }

    /// <summary>The C functions, as soe.h declares them. Each takes the SafeHandle itself:
    /// the runtime keeps the endpoint alive for the call.</summary>
    public static unsafe class Native
    {
        /// <summary>The library's name: libsoe.so (the development link to libsoe.so.1), soe.dll.</summary>
        public const string Library = "soe";

        /// <summary>The ABI this binding was written against (SOE_ABI_VERSION).</summary>
        public const uint AbiVersion = 1;

        /// <summary>SOE_RECORDING_WITH_KEY: a recording's capture holds the RC4 key.</summary>
        public const uint RecordingWithKey = 1;

        /// <summary>An IPv4 or IPv6 address and port (soe_addr).</summary>
        [StructLayout(LayoutKind.Sequential)]
        public struct Addr : IEquatable<Addr>
        {
            /// <summary>4 (IPv4) or 6 (IPv6).</summary>
            public ushort Family;
            /// <summary>The port, in host byte order.</summary>
            public ushort Port;
            /// <summary>The address in network byte order.</summary>
            public fixed byte Ip[16];
            /// <summary>The IPv6 scope id (0 for IPv4).</summary>
            public uint ScopeId;

            /// <summary>The C form of an endpoint, without allocating.</summary>
            public static Addr From(IPEndPoint endpoint)
            {
                Addr a = new Addr();
                IPAddress address = endpoint.Address;
                bool v6 = address.AddressFamily == AddressFamily.InterNetworkV6;
                a.Family = v6 ? (ushort)6 : (ushort)4;
                a.Port = (ushort)endpoint.Port;
                int written;
                address.TryWriteBytes(new Span<byte>(a.Ip, 16), out written);
                if (v6)
                {
                    a.ScopeId = (uint)address.ScopeId;
                }
                return a;
            }

            /// <summary>The address as an IPEndPoint (a new one).</summary>
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

            /// <summary>Field for field.</summary>
            public bool Equals(Addr other)
            {
                fixed (byte* mine = Ip)
                {
                    byte* theirs = other.Ip;
                    for (int i = 0; i < 16; i++)
                    {
                        if (mine[i] != theirs[i]) return false;
                    }
                }
                return Family == other.Family && Port == other.Port && ScopeId == other.ScopeId;
            }

            /// <summary>Field for field.</summary>
            public override bool Equals(object obj)
            {
                return obj is Addr && Equals((Addr)obj);
            }

            /// <summary>A hash of the fields.</summary>
            public override int GetHashCode()
            {
                int h = Family * 31 + Port;
                fixed (byte* bytes = Ip)
                {
                    for (int i = 0; i < 16; i++)
                    {
                        h = h * 31 + bytes[i];
                    }
                }
                return h ^ (int)ScopeId;
            }
        }

        // The C functions (soe.h documents each): internal, the binding's classes are their API.
        [DllImport(Library)] internal static extern Status soe_config_new(uint role, out ConfigHandle config);
        [DllImport(Library)] internal static extern void soe_config_free(IntPtr config);
        [DllImport(Library)] internal static extern Status soe_config_set(ConfigHandle config, Option option, long value);
        [DllImport(Library)] internal static extern Status soe_config_get(ConfigHandle config, Option option, out long value);
        [DllImport(Library)] internal static extern Status soe_config_set_application_protocol(ConfigHandle config, byte* name);
        [DllImport(Library)] internal static extern Status soe_config_set_rc4_key(ConfigHandle config, byte* key, UIntPtr len);
        [DllImport(Library)] internal static extern Status soe_endpoint_new(ConfigHandle config, ulong nowUs, out EndpointHandle ep);
        [DllImport(Library)] internal static extern void soe_endpoint_free(IntPtr ep);
        [DllImport(Library)] internal static extern Status soe_endpoint_handle_datagram(EndpointHandle ep, ulong nowUs, ref Addr from, byte* data, UIntPtr len);
        [DllImport(Library)] internal static extern Status soe_endpoint_poll_transmit(EndpointHandle ep, ulong nowUs, byte* buf, UIntPtr cap, out UIntPtr len, out Addr to);
        [DllImport(Library)] internal static extern Status soe_endpoint_poll_event(EndpointHandle ep, out Event ev, byte* buf, UIntPtr cap);
        [DllImport(Library)] internal static extern Status soe_endpoint_next_timeout(EndpointHandle ep, out ulong deadlineUs);
        [DllImport(Library)] internal static extern Status soe_endpoint_handle_timeout(EndpointHandle ep, ulong nowUs);
        [DllImport(Library)] internal static extern Status soe_connect(EndpointHandle ep, ulong nowUs, ref Addr to, out ulong session);
        [DllImport(Library)] internal static extern Status soe_send(EndpointHandle ep, ulong session, byte channel, byte* data, UIntPtr len);
        [DllImport(Library)] internal static extern Status soe_send_unreliable(EndpointHandle ep, ulong session, byte* data, UIntPtr len);
        [DllImport(Library)] internal static extern Status soe_send_ordered(EndpointHandle ep, ulong session, byte* data, UIntPtr len);
        [DllImport(Library)] internal static extern Status soe_send_capacity(EndpointHandle ep, ulong session, byte channel, out UIntPtr capacity);
        [DllImport(Library)] internal static extern Status soe_close(EndpointHandle ep, ulong nowUs, ulong session, ushort reason);
        [DllImport(Library)] internal static extern Status soe_close_immediately(EndpointHandle ep, ulong nowUs, ulong session, ushort reason);
        [DllImport(Library)] internal static extern Status soe_close_all(EndpointHandle ep, ulong nowUs, ushort reason, byte immediately);
        [DllImport(Library)] internal static extern Status soe_session_set_user(EndpointHandle ep, ulong session, IntPtr user);
        [DllImport(Library)] internal static extern Status soe_session_user(EndpointHandle ep, ulong session, out IntPtr user);
        [DllImport(Library)] internal static extern Status soe_set_encryption(EndpointHandle ep, ulong session, byte on);
        [DllImport(Library)] internal static extern Status soe_session_stats(EndpointHandle ep, ulong session, out Stats stats);
        [DllImport(Library)] internal static extern Status soe_endpoint_session_count(EndpointHandle ep, out UIntPtr count);
        [DllImport(Library)] internal static extern Status soe_session_set_recording(EndpointHandle ep, ulong session, int on);
        [DllImport(Library)] internal static extern Status soe_session_recording(EndpointHandle ep, ulong session, ulong nowUs, ref Addr local, uint flags, byte* buf, UIntPtr cap, out UIntPtr len);
        [DllImport(Library)] internal static extern Status soe_session_recording_file(EndpointHandle ep, ulong session, ulong nowUs, ref Addr local, uint flags, byte* path);
        [DllImport(Library)] internal static extern IntPtr soe_last_error();
        [DllImport(Library)] internal static extern IntPtr soe_status_name(int status);
        [DllImport(Library)] internal static extern IntPtr soe_version();
        [DllImport(Library)] internal static extern uint soe_abi_version();

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

        /// <summary>The loaded library's version ("0.3.0").</summary>
        public static string Version()
        {
            return Utf8(soe_version());
        }

        /// <summary>The loaded library's ABI version (soe_abi_version).</summary>
        public static uint LoadedAbiVersion()
        {
            return soe_abi_version();
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
