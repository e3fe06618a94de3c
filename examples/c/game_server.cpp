// A C++17 game server on the soe C library, the shape of the H1Z1 gateway: the endpoint and its
// config held by RAII owners, a Player per session kept in the session's user pointer, echo of
// every message, traffic of its own, RC4 switched on after each session's first message, and a
// clean shutdown on SIGINT or SIGTERM (every session closed and its Disconnects sent before the
// endpoint goes).
//
//   game_server [--port P] [--tick-hz N] [--rc4-key BASE64]
//
// A player joins with its first reliable message (a login, in a game). From then on it gets a
// reliable "world update" on channel 0: one at once, before the reply to that message, then one
// every 5th tick. --tick-hz N sends every player an unreliable tick N times a second (none
// without it). --rc4-key BASE64 (the `soe` tool's key format) starts every session in plaintext
// and switches it to RC4 as it joins, before anything reliable goes back: the client switches
// after sending its first message (`soe ping --rc4-after-first-message`). The server also
// answers the `soe` tool's key check (key_check.hpp), so `soe ping` and `soe load` tell a
// wrong key from the right one.
//
// The first line on stdout is "listening on 127.0.0.1:PORT". `cargo xtask c-abi` builds it with
// CMake against a moved prefix, linked to libsoe.a (soe::soe_static), runs `soe ping` and
// `soe load` against it at 20 Hz with RC4 after the first message (and `soe ping` with another
// key, which must fail), then stops it with SIGINT, all under valgrind.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"
#include "key_check.hpp"

namespace {

volatile std::sig_atomic_t stop = 0;

void on_signal(int) { stop = 1; }

void check(soe_status s, const char *what) {
    if (s < 0) {
        throw std::runtime_error(std::string(what) + ": " + soe_status_name(s) + ": " +
                                 soe_last_error());
    }
}

// A send that found the queue full or the session closing is dropped (a game would coalesce
// its updates); any other error is the program's.
void check_send(soe_status s) {
    if (s != SOE_ERR_QUEUE_FULL && s != SOE_ERR_CLOSED) check(s, "send");
}

struct ConfigFree {
    void operator()(soe_config *c) const { soe_config_free(c); }
};
struct EndpointFree {
    void operator()(soe_endpoint *e) const { soe_endpoint_free(e); }
};
using Config = std::unique_ptr<soe_config, ConfigFree>;
using Endpoint = std::unique_ptr<soe_endpoint, EndpointFree>;

struct Options {
    int port = 0;
    int tick_hz = 0;
    std::vector<uint8_t> rc4_key;  // empty: no RC4
};

// Standard base64 with or without padding; throws on any other character.
std::vector<uint8_t> from_base64(const std::string &text) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<uint8_t> out;
    uint32_t bits = 0;
    int held = 0;
    for (char c : text.substr(0, text.find('='))) {
        const char *at = c ? std::strchr(alphabet, c) : nullptr;
        if (!at) throw std::invalid_argument("--rc4-key: not base64: " + text);
        bits = bits << 6 | static_cast<uint32_t>(at - alphabet);
        held += 6;
        if (held >= 8) {
            held -= 8;
            out.push_back(static_cast<uint8_t>(bits >> held));
        }
    }
    return out;
}

Options parse(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i += 2) {
        std::string flag = argv[i];
        if (i + 1 == argc) throw std::invalid_argument(flag + " wants a value");
        if (flag == "--port") {
            o.port = std::atoi(argv[i + 1]);
        } else if (flag == "--tick-hz") {
            o.tick_hz = std::atoi(argv[i + 1]);
        } else if (flag == "--rc4-key") {
            o.rc4_key = from_base64(argv[i + 1]);
            if (o.rc4_key.empty()) throw std::invalid_argument("--rc4-key: empty");
        } else {
            throw std::invalid_argument(
                "usage: game_server [--port P] [--tick-hz N] [--rc4-key BASE64]");
        }
    }
    return o;
}

// What the game keeps per player; the session's user pointer points to it.
struct Player {
    explicit Player(soe_session s) : session(s) {}
    soe_session session;
    bool joined = false;         // its first reliable message came (RC4 on from then)
    uint32_t reliable_sent = 0;  // on channel 0: the key check's answer says which it was
    KeyCheck key_check;
    bool mismatch_said = false;
};

class Game {
public:
    explicit Game(const Options &o) : endpoint_(make_endpoint(o)), rc4_(!o.rc4_key.empty()) {}

    soe_endpoint *endpoint() const { return endpoint_.get(); }
    size_t players() const { return players_.size(); }

    // Takes every event: players come, talk and go (their Player freed with the Closed event).
    void take_events() {
        soe_event ev;
        for (;;) {
            soe_status s = soe_endpoint_poll_event(endpoint(), &ev, message_.data(),
                                                   message_.size());
            if (s == SOE_DONE) return;
            if (s == SOE_ERR_BUFFER_TOO_SMALL) {
                message_.resize(ev.len);
                continue;
            }
            check(s, "event");
            auto *player = static_cast<Player *>(ev.user);
            if (ev.kind == SOE_EVENT_ACCEPTED) {
                players_.push_back(std::make_unique<Player>(ev.session));
                check(soe_session_set_user(endpoint(), ev.session, players_.back().get()), "user");
            } else if (ev.kind == SOE_EVENT_MESSAGE && player) {
                on_message(*player, ev);
            } else if (ev.kind == SOE_EVENT_CLOSED && player) {
                auto gone = [&](const auto &p) { return p.get() == player; };
                players_.erase(std::remove_if(players_.begin(), players_.end(), gone),
                               players_.end());
            }
        }
    }

    // One tick: an unreliable tick to every player, and every 5th a world update to those who
    // joined.
    void tick() {
        static const uint8_t tick[] = {0x01, 't', 'i', 'c', 'k'};
        bool update = ++ticks_ % 5 == 0;
        for (auto &p : players_) {
            check_send(soe_send_unreliable(endpoint(), p->session, tick, sizeof tick));
            if (update && p->joined) world_update(*p);
        }
    }

private:
    static Endpoint make_endpoint(const Options &o) {
        soe_config *raw = nullptr;
        check(soe_config_new(SOE_ROLE_SERVER, &raw), "config");
        Config config(raw);
        check(soe_config_set(config.get(), SOE_OPT_IDLE_TIMEOUT_MS, 60000), "idle timeout");
        check(soe_config_set(config.get(), SOE_OPT_CLOSE_TIMEOUT_MS, 1000), "close timeout");
        if (!o.rc4_key.empty()) {
            check(soe_config_set_rc4_key(config.get(), o.rc4_key.data(), o.rc4_key.size()),
                  "key");
            check(soe_config_set(config.get(), SOE_OPT_RC4_AT_START, 0), "rc4 at start");
        }
        soe_endpoint *ep = nullptr;
        check(soe_endpoint_new(config.get(), now_us(), &ep), "endpoint");
        return Endpoint(ep);
    }

    void on_message(Player &p, const soe_event &ev) {
        const uint8_t *data = message_.data();
        if (ev.delivery != SOE_DELIVERY_RELIABLE) {
            bool hello = p.key_check.on_unreliable(data, ev.len, answer_);
            say_mismatch(p);
            if (hello) data = answer_.data();
            size_t len = hello ? answer_.size() : ev.len;
            check_send(soe_send_unreliable(endpoint(), p.session, data, len));
            return;
        }
        if (!p.joined) {
            join(p);
            if (p.key_check.on_first_reliable(data, ev.len, p.reliable_sent, answer_)) {
                send_reliable(p, 0, answer_.data(), answer_.size());
                return;
            }
        }
        send_reliable(p, ev.channel, data, ev.len);
    }

    // A player's first reliable message: RC4 on for this session (from the next message on,
    // both ways), then the world as it is, before the reply.
    void join(Player &p) {
        p.joined = true;
        if (rc4_) check(soe_set_encryption(endpoint(), p.session, 1), "encryption");
        world_update(p);
    }

    void world_update(Player &p) {
        std::string update = "world update " + std::to_string(ticks_ / 5);
        send_reliable(p, 0, reinterpret_cast<const uint8_t *>(update.data()), update.size());
    }

    void send_reliable(Player &p, uint8_t channel, const uint8_t *data, size_t len) {
        soe_status s = soe_send(endpoint(), p.session, channel, data, len);
        check_send(s);
        if (s == SOE_OK && channel == 0) p.reliable_sent++;
    }

    void say_mismatch(Player &p) {
        if (p.key_check.mismatch() && !p.mismatch_said) {
            p.mismatch_said = true;
            std::printf("game_server: a client's RC4 key differs (its key-check probe did not "
                        "read)\n");
            std::fflush(stdout);
        }
    }

    Endpoint endpoint_;
    bool rc4_;
    std::vector<std::unique_ptr<Player>> players_;
    std::vector<uint8_t> message_ = std::vector<uint8_t>(4096);
    KeyCheck::Bytes answer_;
    unsigned long ticks_ = 0;
};

}  // namespace

int main(int argc, char **argv) try {
    const Options options = parse(argc, argv);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    Game game(options);
    int fd = udp_socket();
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<uint16_t>(options.port));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&at), sizeof at) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&at), &len) != 0) {
        std::perror("game_server: socket");
        return 1;
    }
    std::printf("listening on 127.0.0.1:%d\n", ntohs(at.sin_port));
    std::fflush(stdout);
    soe_endpoint *ep = game.endpoint();
    std::vector<uint8_t> datagram(65536);
    const uint64_t tick_us = options.tick_hz > 0 ? 1000000u / uint64_t(options.tick_hz) : 0;
    uint64_t next_tick = now_us() + tick_us;
    while (!stop) {
        pollfd pfd{fd, POLLIN, 0};
        poll(&pfd, 1, poll_timeout_ms(ep, tick_us ? 5 : 1000));
        uint64_t now = now_us();
        check(receive_all(fd, ep, now, datagram.data(), datagram.size()), "datagram");
        check(soe_endpoint_handle_timeout(ep, now), "timeout");
        game.take_events();
        if (tick_us && now >= next_tick) {
            next_tick = now + tick_us;
            game.tick();
        }
        check(send_all(fd, ep, now, datagram.data(), datagram.size()), "transmit");
    }
    size_t open = game.players();
    size_t left = close_all_and_drain(fd, ep, datagram.data(), datagram.size(), 10000);
    std::printf("game_server: shutdown: %zu sessions closed, %zu left\n", open - left, left);
    close(fd);
    return 0;  // the Players of sessions that never said goodbye go with the Game
} catch (const std::exception &e) {
    std::fprintf(stderr, "game_server: %s\n", e.what());
    return 1;
}
