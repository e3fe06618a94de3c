//! The two Winsock socket options the SOE runtime sets on Windows, which no safe crate offers
//! (socket2 0.6 and std have neither).
//!
//! * `set_exclusive_addr_use`: `SO_EXCLUSIVEADDRUSE`, set before `bind`. Without it, another
//!   socket that sets `SO_REUSEADDR` may bind the same port and take datagrams meant for a
//!   running server; with it, that bind fails with `WSAEADDRINUSE` (what a second bind does on
//!   Linux).
//! * `disable_udp_connreset`: `SIO_UDP_CONNRESET` off, after `bind`. Without it, each ICMP
//!   port unreachable that answers a datagram sent to a closed port fails a later receive of
//!   the (unconnected) UDP socket with `WSAECONNRESET`; Linux reports it only to a connected
//!   socket.
//!
//! This is the one crate of the stack that calls Winsock through `unsafe`: each
//! function is a single Winsock call on a socket the caller borrows, with its `SAFETY` comment
//! (see docs/architecture.md, "Unsafe code"). On every other platform the crate is empty.

#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(windows)]
mod windows {
    use std::io;
    use std::os::windows::io::{AsRawSocket, AsSocket};

    use windows_sys::Win32::Networking::WinSock::{
        SIO_UDP_CONNRESET, SO_EXCLUSIVEADDRUSE, SOCKET, SOCKET_ERROR, SOL_SOCKET, WSAGetLastError,
        WSAIoctl, setsockopt,
    };

    /// The raw handle of a socket the caller borrows for the call.
    fn raw(socket: &impl AsSocket) -> io::Result<SOCKET> {
        SOCKET::try_from(socket.as_socket().as_raw_socket())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "socket handle out of range"))
    }

    /// Sets `SO_EXCLUSIVEADDRUSE` on `socket`, which must not be bound yet: no other socket can
    /// then bind its address, even with `SO_REUSEADDR`, while it is open.
    ///
    /// # Errors
    ///
    /// The Winsock error of `setsockopt` (for instance `WSAEINVAL` on a socket already bound).
    #[allow(unsafe_code)]
    pub fn set_exclusive_addr_use(socket: &impl AsSocket) -> io::Result<()> {
        let handle = raw(socket)?;
        // A BOOL: TRUE.
        let on: i32 = 1;
        // SAFETY: `handle` is the open socket `socket` borrows for this call. `optval` points to
        // `on`, a live 4-byte BOOL, and `optlen` is its size: setsockopt reads exactly that
        // many bytes and keeps no pointer after it returns.
        let status = unsafe {
            setsockopt(
                handle,
                SOL_SOCKET,
                SO_EXCLUSIVEADDRUSE,
                (&raw const on).cast::<u8>(),
                4,
            )
        };
        if status == SOCKET_ERROR {
            // SAFETY: WSAGetLastError takes nothing and reads this thread's last Winsock error,
            // the one the call above set.
            return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
        }
        Ok(())
    }

    /// Turns `WSAECONNRESET` reports off on the UDP socket `socket` (`SIO_UDP_CONNRESET` set to
    /// FALSE): an ICMP port unreachable that answers one of its datagrams no longer fails a
    /// later receive.
    ///
    /// # Errors
    ///
    /// The Winsock error of `WSAIoctl` (for instance `WSAEOPNOTSUPP` on a TCP socket, or on a
    /// system without the control code).
    #[allow(unsafe_code)]
    pub fn disable_udp_connreset(socket: &impl AsSocket) -> io::Result<()> {
        let handle = raw(socket)?;
        // A BOOL: FALSE.
        let off: i32 = 0;
        let mut returned: u32 = 0;
        // SAFETY: `handle` is the open socket `socket` borrows for this call. The input buffer
        // is `off`, a live 4-byte BOOL, with its size; there is no output buffer (NULL, 0
        // bytes); `returned` is a live u32 the call writes. With no OVERLAPPED and no
        // completion routine the call is synchronous: no pointer outlives it.
        let status = unsafe {
            WSAIoctl(
                handle,
                SIO_UDP_CONNRESET,
                (&raw const off).cast(),
                4,
                std::ptr::null_mut(),
                0,
                &raw mut returned,
                std::ptr::null_mut(),
                None,
            )
        };
        if status == SOCKET_ERROR {
            // SAFETY: WSAGetLastError takes nothing and reads this thread's last Winsock error,
            // the one the call above set.
            return Err(io::Error::from_raw_os_error(unsafe { WSAGetLastError() }));
        }
        Ok(())
    }
}

#[cfg(windows)]
pub use windows::{disable_udp_connreset, set_exclusive_addr_use};
