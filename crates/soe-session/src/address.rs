//! What the endpoint's per-source limits count as one source.
//!
//! Any host owns as many ports as it likes, and an IPv6 host usually a whole /64. So the
//! per-source limits of an [`Endpoint`](crate::Endpoint) (the SessionRequest rate, the share of
//! stateless replies) are kept per *host*, never per address: every port of one IPv4 address is
//! one source, and so is every address of one IPv6 /64. An IPv4 address seen as IPv6 (mapped,
//! `::ffff:a.b.c.d`, or through the NAT64 prefix `64:ff9b::/96`) is the IPv4 address's source.

use std::fmt::Debug;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// An address an [`Endpoint`](crate::Endpoint) routes sessions by, and the source its
/// per-source limits charge for it.
///
/// Implemented for [`SocketAddr`] (the host: the IP address, an IPv6 /64 as one) and, for tests
/// and simulators that name peers by number, for the unsigned integers (each number its own
/// host).
pub trait PeerAddress: Copy + Eq + Hash + Debug {
    /// The source this address belongs to: addresses with equal hosts share one source's
    /// limits, whatever their ports.
    fn host(&self) -> u128;

    /// Whether the address is on this machine's loopback network (see
    /// [`EndpointConfig::with_limit_loopback`](crate::EndpointConfig::with_limit_loopback)).
    fn is_loopback(&self) -> bool {
        false
    }
}

impl PeerAddress for SocketAddr {
    fn host(&self) -> u128 {
        match self.ip() {
            IpAddr::V4(ip) => v4_host(ip),
            IpAddr::V6(ip) => match embedded_v4(ip) {
                Some(v4) => v4_host(v4),
                // The /64: the part of an address an ISP hands to one subscriber.
                None => u128::from(ip) & !u128::from(u64::MAX),
            },
        }
    }

    fn is_loopback(&self) -> bool {
        match self.ip() {
            IpAddr::V4(ip) => ip.is_loopback(),
            IpAddr::V6(ip) => {
                ip.is_loopback() || embedded_v4(ip).is_some_and(|v4| v4.is_loopback())
            }
        }
    }
}

/// An IPv4 address's host: the address as IPv4-mapped IPv6, so that it never equals an IPv6
/// /64's.
fn v4_host(ip: Ipv4Addr) -> u128 {
    u128::from(ip.to_ipv6_mapped())
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:0:0/96`) or NAT64 (`64:ff9b::/96`) IPv6
/// address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]).then(|| {
        let [.., a, b, c, d] = ip.octets();
        Ipv4Addr::new(a, b, c, d)
    })
}

macro_rules! numbered_peers {
    ($($t:ty),*) => {$(
        impl PeerAddress for $t {
            fn host(&self) -> u128 {
                u128::from(*self)
            }
        }
    )*};
}

numbered_peers!(u8, u16, u32, u64);

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> u128 {
        s.parse::<SocketAddr>().map(|a| a.host()).unwrap()
    }

    #[test]
    fn ports_never_make_a_new_source() {
        assert_eq!(host("192.0.2.7:1"), host("192.0.2.7:65535"));
        assert_ne!(host("192.0.2.7:1"), host("192.0.2.8:1"));
    }

    #[test]
    fn an_ipv6_64_is_one_source() {
        assert_eq!(
            host("[2001:db8:1:2::1]:5"),
            host("[2001:db8:1:2:ffff:1:2:3]:6")
        );
        assert_ne!(host("[2001:db8:1:2::1]:5"), host("[2001:db8:1:3::1]:5"));
    }

    #[test]
    fn ipv4_seen_as_ipv6_is_the_ipv4_source() {
        let v4 = host("192.0.2.7:1");
        assert_eq!(host("[::ffff:192.0.2.7]:2"), v4);
        assert_eq!(host("[64:ff9b::192.0.2.7]:3"), v4);
        // Not the /64 of the mapped prefix, which would make every IPv4 host one source.
        assert_ne!(host("[::ffff:192.0.2.8]:2"), v4);
    }

    #[test]
    fn loopback_in_every_spelling() {
        for a in [
            "127.0.0.1:1",
            "127.8.9.10:1",
            "[::1]:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(a.parse::<SocketAddr>().unwrap().is_loopback(), "{a}");
        }
        assert!(!"192.0.2.7:1".parse::<SocketAddr>().unwrap().is_loopback());
        assert!(!7u32.is_loopback());
    }
}
