// The server's side of the `soe` tool's RC4 key check (crates/soe-cli/README.md, "The RC4 key
// check"), for a C++ server that wants `soe ping` and `soe load` to tell whether their key is
// its key. An echo alone cannot: what a wrong key garbles on the way in, the same wrong key
// ungarbles on the way back. One KeyCheck per session:
//
// - the tool sends a hello unreliably: "\x7fsoe key check?", an 8-byte nonce, then '?' (its
//   probe is next) or '>' (its probe went). The server answers each one unreliably with
//   "\x7fsoe key check!", the same nonce, what it made of the session's first reliable message
//   ('?' none yet, '=' the probe, '!' not a probe, '-' it came before any hello), and a 4-byte
//   big-endian index: which of the server's reliable messages on channel 0 answered the probe;
// - the probe is the session's first reliable message: 8 random bytes and 8 bytes mixed from
//   them. The server answers it, instead of an echo, with its 16 bytes reversed, reliably on
//   channel 0. Reversed, each byte sits at another keystream position, so a wrong key shows.
//
// Nothing here touches the library: the server passes messages in and sends what comes out.
#ifndef SOE_EXAMPLE_KEY_CHECK_HPP
#define SOE_EXAMPLE_KEY_CHECK_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

class KeyCheck {
public:
    using Bytes = std::vector<uint8_t>;

    // An unreliable message. A hello: sets `answer` to the reply to send unreliably (the hello
    // itself is not echoed) and returns true. Anything else: false.
    bool on_unreliable(const uint8_t *message, size_t len, Bytes &answer) {
        if (len != kMarkLen + 9 || std::memcmp(message, kHello, kMarkLen) != 0) return false;
        const uint8_t *nonce = message + kMarkLen;
        uint8_t phase = message[kMarkLen + 8];
        if (phase != '?' && phase != '>') return false;
        if (state_ == State::Idle) state_ = State::Awaiting;
        if (state_ == State::NotProbe && phase == '>') {
            state_ = State::Mismatch;  // the message it says was its probe did not read
        }
        answer.assign(kAnswer, kAnswer + kMarkLen);
        answer.insert(answer.end(), nonce, nonce + 8);
        answer.push_back(status_byte());
        for (int shift = 24; shift >= 0; shift -= 8) {
            answer.push_back(static_cast<uint8_t>(answer_index_ >> shift));
        }
        return true;
    }

    // The session's first reliable message, which comes after `sent_before` reliable messages
    // the server sent on channel 0. The probe: sets `answer` to send on channel 0 instead of
    // an echo and returns true. Anything else: false (echo it as usual).
    bool on_first_reliable(const uint8_t *message, size_t len, uint32_t sent_before,
                           Bytes &answer) {
        if (state_ == State::Idle) {
            state_ = State::Plain;  // an ordinary client, which never sent a hello
        } else if (state_ == State::Awaiting && is_probe(message, len)) {
            state_ = State::Read;
            answer_index_ = sent_before;
            answer.assign(message, message + len);
            std::reverse(answer.begin(), answer.end());
            return true;
        } else if (state_ == State::Awaiting) {
            state_ = State::NotProbe;
        }
        return false;
    }

    // Whether a client said that its probe went and it did not read here: the keys differ.
    bool mismatch() const { return state_ == State::Mismatch; }

private:
    enum class State { Idle, Plain, Awaiting, Read, NotProbe, Mismatch };
    static constexpr size_t kMarkLen = 15;
    static constexpr uint8_t kHello[kMarkLen + 1] = "\x7fsoe key check?";
    static constexpr uint8_t kAnswer[kMarkLen + 1] = "\x7fsoe key check!";
    static constexpr size_t kProbeLen = 16;

    uint8_t status_byte() const {
        switch (state_) {
        case State::Read: return '=';
        case State::Plain: return '-';
        case State::NotProbe:
        case State::Mismatch: return '!';
        default: return '?';
        }
    }

    // SplitMix64's finaliser: the probe's second half is this of its first half.
    static uint64_t mix(uint64_t x) {
        uint64_t z = x + 0x9E3779B97F4A7C15u;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        return z ^ (z >> 31);
    }

    static uint64_t big_endian(const uint8_t *p) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) v = v << 8 | p[i];
        return v;
    }

    static bool is_probe(const uint8_t *message, size_t len) {
        return len == kProbeLen && mix(big_endian(message)) == big_endian(message + 8);
    }

    State state_ = State::Idle;
    uint32_t answer_index_ = 0;
};

#endif
