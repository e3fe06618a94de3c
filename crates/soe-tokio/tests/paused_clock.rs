//! The driver under tokio's paused test clock (`start_paused`), as applications test with it:
//! its timer must still end a connect that no server answers. The timer fires in virtual time
//! while the driver reads the real clock, so a driver that skipped polling a timer it believed
//! still to come (issue 44 §2, branch async-wakeup-wip) was never woken again and stalled here.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use soe_tokio::{Endpoint, EndpointConfig, SessionConfig};

#[tokio::test(start_paused = true)]
async fn a_connect_to_a_silent_port_times_out_under_the_paused_clock() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let session = SessionConfig::new("SoePaused").with_connect_timeout(Duration::from_millis(300));
    let client = Endpoint::client(EndpointConfig::client(Arc::new(session))).unwrap();
    let connect = client.connect(silent.local_addr().unwrap());
    let outcome = tokio::time::timeout(Duration::from_secs(3600), connect).await;
    assert!(
        matches!(outcome, Ok(Err(_))),
        "the connect did not time out: {outcome:?}"
    );
}
