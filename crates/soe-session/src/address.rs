//! What the endpoint's per-source limits count as one source.
//!
//! Any host owns as many ports as it likes, an IPv6 host usually a whole /64, and a network
//! many hosts. So the per-source limits of an [`Endpoint`](crate::Endpoint) are kept per
//! *prefix*, never per address, at several prefix lengths at once (the
//! [`SourceLevel`](crate::SourceLevel)s of its config): by default every port of one IPv4
//! address and every address of one IPv6 /64 is one host, every IPv6 /56 one site, and every
//! IPv4 /24 and IPv6 /48 one network, each level with its own share. An IPv4 address seen as
//! IPv6 (mapped, `::ffff:a.b.c.d`, or through a NAT64 translator prefix, `64:ff9b::/96` by
//! default; see [`EndpointConfig::with_nat64_prefixes`](crate::EndpointConfig::with_nat64_prefixes))
//! is charged as that IPv4 address.

use std::fmt::Debug;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// An address an [`Endpoint`](crate::Endpoint) routes sessions by, and what its per-source
/// limits charge for it.
///
/// Implemented for [`SocketAddr`] (charged by the prefixes of its IP address) and, for tests
/// and simulators that name peers by number, for the unsigned integers (each number a host and
/// a network of its own).
pub trait PeerAddress: Copy + Eq + Hash + Debug {
    /// The IP address, by whose prefixes the per-source limits charge this address; `None`
    /// for an address that is not an IP address, which is then one source of its own at every
    /// level, named by [`PeerAddress::host`].
    fn ip(&self) -> Option<IpAddr> {
        None
    }

    /// For an address without an [`ip`](PeerAddress::ip): the number naming its host.
    /// Addresses with equal hosts share one source's limits, whatever their ports.
    fn host(&self) -> u128;

    /// Whether the address is this machine (see
    /// [`EndpointConfig::with_limit_loopback`](crate::EndpointConfig::with_limit_loopback)).
    fn is_loopback(&self) -> bool {
        false
    }
}

impl PeerAddress for SocketAddr {
    fn ip(&self) -> Option<IpAddr> {
        Some(Self::ip(self))
    }

    fn host(&self) -> u128 {
        match Self::ip(self) {
            IpAddr::V4(ip) => u128::from(ip.to_ipv6_mapped()),
            IpAddr::V6(ip) => u128::from(ip),
        }
    }

    /// `127.0.0.0/8`, `::1`, and `::ffff:127.0.0.0/104` (an IPv4 loopback address as a
    /// dual-stack socket reports it): only what really is this host. Not the NAT64 spelling
    /// (`64:ff9b::127.0.0.1`), which is global unicast that anyone may send from.
    fn is_loopback(&self) -> bool {
        match Self::ip(self) {
            IpAddr::V4(ip) => ip.is_loopback(),
            IpAddr::V6(ip) => {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        }
    }
}

/// The IPv4 address an IPv6 address stands for: an IPv4-mapped address (`::ffff:0:0/96`), or
/// one inside a NAT64 translator prefix of `prefixes` (each `(prefix, length)`, the address
/// embedded as RFC 6052 §2.2 lays it out for that length). `None` for a native IPv6 address.
pub(crate) fn embedded_v4(ip: Ipv6Addr, prefixes: &[(Ipv6Addr, u8)]) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let bits = u128::from(ip);
    prefixes.iter().find_map(|&(prefix, len)| {
        let mask = prefix_mask(len);
        if bits & mask == u128::from(prefix) & mask {
            rfc6052_v4(ip, len)
        } else {
            None
        }
    })
}

/// The mask of the first `len` bits of an IPv6 address.
pub(crate) fn prefix_mask(len: u8) -> u128 {
    match len {
        0 => 0,
        len if len >= 128 => u128::MAX,
        len => !(u128::MAX >> len),
    }
}

/// The prefix lengths RFC 6052 defines for a NAT64 translator prefix.
pub(crate) const NAT64_LENGTHS: [u8; 6] = [32, 40, 48, 56, 64, 96];

/// The IPv4 address embedded after a prefix of `len` bits (RFC 6052 §2.2): its 32 bits follow
/// the prefix, skipping bits 64 to 71 (the "u" octet).
fn rfc6052_v4(ip: Ipv6Addr, len: u8) -> Option<Ipv4Addr> {
    if !NAT64_LENGTHS.contains(&len) {
        return None;
    }
    let mut v4 = [0u8; 4];
    let octets = ip.octets().into_iter().enumerate();
    let embedded = octets.skip(usize::from(len / 8)).filter(|&(i, _)| i != 8);
    for (slot, (_, byte)) in v4.iter_mut().zip(embedded) {
        *slot = byte;
    }
    Some(Ipv4Addr::from(v4))
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

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    const WKP: (Ipv6Addr, u8) = (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96);

    #[test]
    fn loopback_is_only_this_host() {
        for s in [
            "127.0.0.1:1",
            "127.8.9.10:1",
            "[::1]:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(a(s).is_loopback(), "{s}");
        }
        for s in [
            "192.0.2.7:1",
            "[64:ff9b::127.0.0.1]:1",
            "[64:ff9b::7f00:1]:1",
            "[::127.0.0.1]:1",
            "[2001:db8::1]:1",
        ] {
            assert!(!a(s).is_loopback(), "{s}");
        }
        assert!(!7u32.is_loopback());
    }

    #[test]
    fn ipv4_inside_ipv6_is_found_in_mapped_and_translator_addresses() {
        let v4 = Ipv4Addr::new(192, 0, 2, 33);
        assert_eq!(embedded_v4(v6("::ffff:192.0.2.33"), &[]), Some(v4));
        assert_eq!(embedded_v4(v6("64:ff9b::192.0.2.33"), &[WKP]), Some(v4));
        assert_eq!(embedded_v4(v6("64:ff9b::192.0.2.33"), &[]), None);
        // RFC 6052 §2.4's examples of 192.0.2.33 under 2001:db8:122:344::/N.
        for (len, s) in [
            (32, "2001:db8:c000:221::"),
            (40, "2001:db8:1c0:2:21::"),
            (48, "2001:db8:122:c000:2:2100::"),
            (56, "2001:db8:122:3c0:0:221::"),
            (64, "2001:db8:122:344:c0:2:2100:0"),
            (96, "2001:db8:122:344::192.0.2.33"),
        ] {
            let prefix = (v6("2001:db8:122:344::"), len);
            assert_eq!(embedded_v4(v6(s), &[prefix]), Some(v4), "/{len}");
        }
        // RFC 8215's local-use prefix, as a /48.
        let local = (v6("64:ff9b:1::"), 48);
        assert_eq!(
            embedded_v4(v6("64:ff9b:1:c000:2:2100::"), &[WKP, local]),
            Some(v4)
        );
        assert_eq!(embedded_v4(v6("2001:db8::1"), &[WKP, local]), None);
    }
}
