// A C++17 game server on the soe C library: the endpoint and its config held by RAII owners,
// echo of every message, an optional unreliable tick to every player (--tick-hz N), a player
// object per session kept in the session's user pointer, and a clean shutdown on SIGINT or
// SIGTERM (every session closed and its Disconnects sent before the endpoint goes).
//
//   game_server [--port P] [--tick-hz N]
//
// The first line on stdout is "listening on 127.0.0.1:PORT". `cargo xtask c-abi` builds it with
// CMake against a moved prefix, linked to libsoe.a (soe::soe_static), and stops it with SIGINT.
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

namespace {

volatile std::sig_atomic_t stop = 0;

void on_signal(int) { stop = 1; }

void check(soe_status s, const char *what) {
    if (s < 0) {
        throw std::runtime_error(std::string(what) + ": " + soe_status_name(s) + ": " +
                                 soe_last_error());
    }
}

struct ConfigFree {
    void operator()(soe_config *c) const { soe_config_free(c); }
};
struct EndpointFree {
    void operator()(soe_endpoint *e) const { soe_endpoint_free(e); }
};
using Config = std::unique_ptr<soe_config, ConfigFree>;
using Endpoint = std::unique_ptr<soe_endpoint, EndpointFree>;

// What the game keeps per player; the session's user pointer points to it.
struct Player {
    soe_session session;
    long messages = 0;
};

Endpoint make_endpoint() {
    soe_config *raw = nullptr;
    check(soe_config_new(SOE_ROLE_SERVER, &raw), "config");
    Config config(raw);
    check(soe_config_set(config.get(), SOE_OPT_IDLE_TIMEOUT_MS, 60000), "idle timeout");
    check(soe_config_set(config.get(), SOE_OPT_CLOSE_TIMEOUT_MS, 1000), "close timeout");
    soe_endpoint *ep = nullptr;
    check(soe_endpoint_new(config.get(), now_us(), &ep), "endpoint");
    return Endpoint(ep);
}

// Takes every event: players join, echo, leave (their Player freed with the Closed event).
void take_events(soe_endpoint *ep, std::vector<uint8_t> &buf, std::vector<Player *> &players) {
    soe_event ev;
    for (;;) {
        soe_status s = soe_endpoint_poll_event(ep, &ev, buf.data(), buf.size());
        if (s == SOE_DONE) return;
        if (s == SOE_ERR_BUFFER_TOO_SMALL) {
            buf.resize(ev.len);
            continue;
        }
        check(s, "event");
        auto *player = static_cast<Player *>(ev.user);
        if (ev.kind == SOE_EVENT_ACCEPTED) {
            player = new Player{ev.session};
            players.push_back(player);
            check(soe_session_set_user(ep, ev.session, player), "user");
        } else if (ev.kind == SOE_EVENT_MESSAGE && player) {
            player->messages++;
            soe_status sent = ev.delivery == SOE_DELIVERY_RELIABLE
                                  ? soe_send(ep, ev.session, ev.channel, buf.data(), ev.len)
                                  : soe_send_unreliable(ep, ev.session, buf.data(), ev.len);
            if (sent != SOE_ERR_QUEUE_FULL && sent != SOE_ERR_CLOSED) check(sent, "send");
        } else if (ev.kind == SOE_EVENT_CLOSED && player) {
            players.erase(std::remove(players.begin(), players.end(), player), players.end());
            delete player;
        }
    }
}

}  // namespace

int main(int argc, char **argv) try {
    int port = 0, tick_hz = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--port")) port = std::atoi(argv[i + 1]);
        if (!std::strcmp(argv[i], "--tick-hz")) tick_hz = std::atoi(argv[i + 1]);
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    Endpoint ep = make_endpoint();
    int fd = udp_socket();
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<uint16_t>(port));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&at), sizeof at) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&at), &len) != 0) {
        std::perror("game_server: socket");
        return 1;
    }
    std::printf("listening on 127.0.0.1:%d\n", ntohs(at.sin_port));
    std::fflush(stdout);
    std::vector<uint8_t> datagram(65536), message(4096);
    std::vector<Player *> players;
    const uint64_t tick_us = tick_hz > 0 ? 1000000u / static_cast<uint64_t>(tick_hz) : 0;
    uint64_t next_tick = now_us() + tick_us;
    const uint8_t tick[] = {0x01, 't', 'i', 'c', 'k'};
    while (!stop) {
        pollfd pfd{fd, POLLIN, 0};
        poll(&pfd, 1, poll_timeout_ms(ep.get(), tick_us ? 5 : 1000));
        uint64_t now = now_us();
        check(receive_all(fd, ep.get(), now, datagram.data(), datagram.size()), "datagram");
        check(soe_endpoint_handle_timeout(ep.get(), now), "timeout");
        take_events(ep.get(), message, players);
        if (tick_us && now >= next_tick) {
            next_tick = now + tick_us;
            for (Player *p : players) soe_send_unreliable(ep.get(), p->session, tick, sizeof tick);
        }
        check(send_all(fd, ep.get(), now, datagram.data(), datagram.size()), "transmit");
    }
    size_t open = players.size();
    size_t left = close_all_and_drain(fd, ep.get(), datagram.data(), datagram.size(), 10000);
    std::printf("game_server: shutdown: %zu sessions closed, %zu left\n", open - left, left);
    for (Player *p : players) delete p;  // sessions that never said goodbye
    close(fd);
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "game_server: %s\n", e.what());
    return 1;
}
