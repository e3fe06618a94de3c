//! The two options on real sockets (run on Windows, or under wine).
#![cfg(windows)]
#![allow(missing_docs)]

use std::net::SocketAddr;

use socket2::{Domain, Socket, Type};

fn udp() -> Socket {
    Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap()
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn an_exclusive_port_cannot_be_taken_with_reuse_address() {
    let ours = udp();
    soe_winsock::set_exclusive_addr_use(&ours).unwrap();
    ours.bind(&loopback().into()).unwrap();
    let addr = ours.local_addr().unwrap();
    let thief = udp();
    thief.set_reuse_address(true).unwrap();
    assert!(thief.bind(&addr).is_err());
}

#[test]
fn udp_connreset_can_be_turned_off_on_a_udp_socket() {
    let socket = udp();
    socket.bind(&loopback().into()).unwrap();
    soe_winsock::disable_udp_connreset(&socket).unwrap();
    // Still a working socket.
    let peer = udp();
    peer.bind(&loopback().into()).unwrap();
    peer.send_to(b"hi", &socket.local_addr().unwrap()).unwrap();
    let mut buf = [std::mem::MaybeUninit::new(0u8); 8];
    let (len, from) = socket.recv_from(&mut buf).unwrap();
    assert_eq!(len, 2);
    assert_eq!(from.as_socket(), peer.local_addr().unwrap().as_socket());
}
