//! Opcodes and reliable channels.

/// One of the four independent reliable channels (0 to 3). Games seen so far use channel 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Channel(u8);

impl Channel {
    /// Channel 0, the one every known game uses.
    pub const ZERO: Self = Self(0);
    /// The four channels in order.
    pub const ALL: [Self; 4] = [Self(0), Self(1), Self(2), Self(3)];

    /// Channel `n`, or `None` when `n > 3`.
    pub const fn new(n: u8) -> Option<Self> {
        if n < 4 { Some(Self(n)) } else { None }
    }

    /// The channel of an opcode `offset` past its family's first (channel 0) opcode, kept to
    /// 0 to 3 (the low two bits) as [`OpCode::from_u16`] keeps it.
    #[inline]
    pub(crate) const fn from_offset(offset: u8) -> Self {
        Self(offset % 4)
    }

    /// The channel number, 0 to 3.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Every opcode of the protocol. The data and ack ops carry their channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpCode {
    /// 0x01, Connect in the original library.
    SessionRequest,
    /// 0x02, Confirm in the original library.
    SessionResponse,
    /// 0x03, a bundle of sub-packets.
    MultiPacket,
    /// 0x05, Terminate in the original library.
    Disconnect,
    /// 0x06, KeepAlive in the original library.
    Heartbeat,
    /// 0x07, ClockSync in the original library.
    NetStatusRequest,
    /// 0x08, ClockReflect in the original library.
    NetStatusResponse,
    /// 0x09 to 0x0C.
    ReliableData(Channel),
    /// 0x0D to 0x10.
    ReliableDataFragment(Channel),
    /// 0x11 to 0x14, a selective ack.
    Acknowledge(Channel),
    /// 0x15 to 0x18, a cumulative ack.
    AcknowledgeAll(Channel),
    /// 0x19, the data bundle.
    Group,
    /// 0x1A, ordered unreliable data.
    Ordered,
    /// 0x1B, ordered unreliable data (second form).
    Ordered2,
    /// 0x1C.
    PortAlive,
    /// 0x1D, UnreachableConnection in the original library.
    UnknownSender,
    /// 0x1E.
    RemapConnection,
}

impl OpCode {
    /// The opcode for a wire value, or `None` for an unknown one.
    pub const fn from_u16(value: u16) -> Option<Self> {
        let ch = Channel::from_offset(value.wrapping_sub(0x09) as u8);
        Some(match value {
            0x01 => Self::SessionRequest,
            0x02 => Self::SessionResponse,
            0x03 => Self::MultiPacket,
            0x05 => Self::Disconnect,
            0x06 => Self::Heartbeat,
            0x07 => Self::NetStatusRequest,
            0x08 => Self::NetStatusResponse,
            0x09..=0x0C => Self::ReliableData(ch),
            0x0D..=0x10 => Self::ReliableDataFragment(ch),
            0x11..=0x14 => Self::Acknowledge(ch),
            0x15..=0x18 => Self::AcknowledgeAll(ch),
            0x19 => Self::Group,
            0x1A => Self::Ordered,
            0x1B => Self::Ordered2,
            0x1C => Self::PortAlive,
            0x1D => Self::UnknownSender,
            0x1E => Self::RemapConnection,
            _ => return None,
        })
    }

    /// The wire value.
    pub const fn to_u16(self) -> u16 {
        match self {
            Self::SessionRequest => 0x01,
            Self::SessionResponse => 0x02,
            Self::MultiPacket => 0x03,
            Self::Disconnect => 0x05,
            Self::Heartbeat => 0x06,
            Self::NetStatusRequest => 0x07,
            Self::NetStatusResponse => 0x08,
            Self::ReliableData(c) => 0x09 + c.0 as u16,
            Self::ReliableDataFragment(c) => 0x0D + c.0 as u16,
            Self::Acknowledge(c) => 0x11 + c.0 as u16,
            Self::AcknowledgeAll(c) => 0x15 + c.0 as u16,
            Self::Group => 0x19,
            Self::Ordered => 0x1A,
            Self::Ordered2 => 0x1B,
            Self::PortAlive => 0x1C,
            Self::UnknownSender => 0x1D,
            Self::RemapConnection => 0x1E,
        }
    }

    /// Whether packets with this opcode travel without compression flag and CRC
    /// (SessionRequest, SessionResponse, UnknownSender, RemapConnection).
    pub const fn is_contextless(self) -> bool {
        matches!(
            self,
            Self::SessionRequest
                | Self::SessionResponse
                | Self::UnknownSender
                | Self::RemapConnection
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips() {
        let mut known = 0;
        for v in 0..=u16::MAX {
            if let Some(op) = OpCode::from_u16(v) {
                assert_eq!(op.to_u16(), v);
                known += 1;
            }
        }
        assert_eq!(known, 29);
        assert_eq!(
            OpCode::from_u16(0x0B),
            Some(OpCode::ReliableData(Channel(2)))
        );
        assert_eq!(
            OpCode::from_u16(0x18),
            Some(OpCode::AcknowledgeAll(Channel(3)))
        );
        assert_eq!(OpCode::from_u16(0x04), None);
    }
}
