//! Named presets: what is known of each real peer, as settings.
//!
//! A preset sets only the values that a real peer's source or a capture shows; everything else
//! keeps its default. docs/interop.md ("Presets") gives the source of every value.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use soe_wire::CrcLength;

use crate::SessionConfig;

/// A known peer whose facts a [`SessionConfig`] can take at once, with
/// [`SessionConfig::preset`] or [`SessionConfig::with_preset`]. Later setters override what a
/// preset set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Preset {
    /// A server for the Free Realms game client: 512-byte datagrams, a 2-byte CRC, and at most
    /// 64 KiB in flight per reliable channel (the client's socket buffer, by its library's
    /// default).
    FreeRealms,
    /// A client of the Free Realms emulator's own server (OSFR's LibSOE, C#): accepts the bare
    /// `00 06` Heartbeat it answers with and the Disconnect it sends without a CRC
    /// ([`SessionConfig::with_accept_libsoe_quirks`]).
    OsfrLibSoe,
    /// The H1Z1 gateway, as h1z1-server runs it: application protocol `ExternalGatewayApi_3`,
    /// 512-byte datagrams, a 2-byte CRC, RC4 switched on by the application after the first
    /// message (the key is the deployment's), and a peer that holds acks up to 50 ms.
    H1z1,
    /// A server for the PlanetSide 2 client: 512-byte datagrams, a 2-byte CRC, and a client
    /// that acknowledges only now and then (up to 500 ms assumed).
    PlanetSide2,
}

impl Preset {
    /// Every preset, in the order of their names.
    pub const ALL: [Self; 4] = [
        Self::FreeRealms,
        Self::OsfrLibSoe,
        Self::H1z1,
        Self::PlanetSide2,
    ];

    /// The preset's name, as the `soe` tool, the C ABI and the bindings spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::FreeRealms => "free-realms",
            Self::OsfrLibSoe => "osfr-libsoe",
            Self::H1z1 => "h1z1",
            Self::PlanetSide2 => "planetside2",
        }
    }

    /// Sets the preset's values on `config`.
    fn apply(self, config: SessionConfig) -> SessionConfig {
        let reliable = |config: &SessionConfig| (**config.reliable()).clone();
        match self {
            Self::FreeRealms => {
                let r = reliable(&config).with_max_outstanding_bytes(64 * 1024);
                config
                    .with_udp_length(512)
                    .with_crc_length(CrcLength::TWO)
                    .with_valid_reliable(r)
            }
            Self::OsfrLibSoe => config.with_accept_libsoe_quirks(true),
            Self::H1z1 => {
                let r = reliable(&config).with_max_ack_delay(Duration::from_millis(50));
                config
                    .with_application_protocol("ExternalGatewayApi_3")
                    .with_udp_length(512)
                    .with_crc_length(CrcLength::TWO)
                    .with_encryption_at_start(false)
                    .with_valid_reliable(r)
            }
            Self::PlanetSide2 => {
                let r = reliable(&config).with_max_ack_delay(Duration::from_millis(500));
                config
                    .with_udp_length(512)
                    .with_crc_length(CrcLength::TWO)
                    .with_valid_reliable(r)
            }
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`Preset`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown preset {name:?}; known: free-realms, osfr-libsoe, h1z1, planetside2")]
pub struct UnknownPreset {
    /// The name given.
    pub name: String,
}

impl FromStr for Preset {
    type Err = UnknownPreset;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownPreset { name: name.into() })
    }
}

impl SessionConfig {
    /// The defaults with `preset`'s values (see [`Preset`]).
    pub fn preset(preset: Preset) -> Self {
        Self::default().with_preset(preset)
    }

    /// Sets `preset`'s values, and leaves every other setting as it is.
    #[must_use]
    pub fn with_preset(self, preset: Preset) -> Self {
        preset.apply(self)
    }

    /// Installs a reliable config that a preset derived from a valid one.
    fn with_valid_reliable(self, reliable: soe_reliable::ReliableConfig) -> Self {
        let fallback = self.clone();
        self.with_reliable(Arc::new(reliable)).unwrap_or(fallback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known() {
        for preset in Preset::ALL {
            assert_eq!(preset.name().parse::<Preset>(), Ok(preset));
            assert_eq!(preset.to_string(), preset.name());
        }
        assert_eq!("H1Z1".parse::<Preset>(), Ok(Preset::H1z1));
        let err = "eq2".parse::<Preset>().unwrap_err();
        assert!(err.to_string().contains("free-realms"), "{err}");
    }

    #[test]
    fn presets_set_their_values_and_nothing_else() {
        let d = SessionConfig::default();
        let fr = SessionConfig::preset(Preset::FreeRealms);
        assert_eq!(fr.reliable().max_outstanding_bytes, 64 * 1024);
        assert_eq!((fr.udp_length(), fr.crc_length()), (512, CrcLength::TWO));
        assert_eq!(fr.reliable().max_ack_delay, d.reliable().max_ack_delay);
        assert!(!fr.accept_libsoe_quirks());
        assert!(SessionConfig::preset(Preset::OsfrLibSoe).accept_libsoe_quirks());
        assert!(!d.accept_libsoe_quirks());
        let h1 = SessionConfig::preset(Preset::H1z1);
        assert_eq!(h1.application_protocol(), b"ExternalGatewayApi_3");
        assert!(!h1.encryption_at_start());
        assert_eq!(h1.reliable().max_ack_delay, Duration::from_millis(50));
        assert_eq!(
            h1.reliable().max_outstanding_bytes,
            d.reliable().max_outstanding_bytes
        );
        let ps2 = SessionConfig::preset(Preset::PlanetSide2);
        assert_eq!(ps2.reliable().max_ack_delay, Duration::from_millis(500));
        // A preset keeps what it does not set.
        let kept = SessionConfig::new("Mine_1")
            .with_compression(true)
            .with_preset(Preset::FreeRealms);
        assert_eq!(kept.application_protocol(), b"Mine_1");
        assert!(kept.compression());
    }
}
