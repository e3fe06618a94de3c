/*
 * An SOE echo server in C on the soe-ffi C ABI: one UDP socket, a poll() loop, and the
 * sans-I/O endpoint. Every message goes back the way it came (reliable on its channel,
 * unreliable, ordered).
 *
 *   echo_server [--port P] [--key TEXT] [--protocol NAME] [--sessions N]
 *
 * --key TEXT turns RC4 on with the bytes of TEXT as the key. With --sessions N the server exits
 * (status 0) once N sessions have closed; otherwise it runs until SIGINT or SIGTERM, then closes
 * every session and sends their Disconnects before it frees the endpoint. The first
 * line on stdout is "listening on 127.0.0.1:PORT" (with --port 0, the port chosen).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static void check(soe_status status, const char *what) {
    if (status < 0) {
        fprintf(stderr, "echo_server: %s: %s: %s\n", what, soe_status_name(status),
                soe_last_error());
        exit(1);
    }
}

/* A message that could not be queued yet (the session's queue was full). */
struct held {
    int full;
    soe_event event;
    uint8_t *data;
};

/* Echoes one message; returns 0 when the send queue is full and the message must wait. */
static int echo(soe_endpoint *ep, const soe_event *ev, const uint8_t *data) {
    soe_status s;
    switch (ev->delivery) {
    case SOE_DELIVERY_RELIABLE:
        s = soe_send(ep, ev->session, ev->channel, data, ev->len);
        break;
    case SOE_DELIVERY_ORDERED:
        s = soe_send_ordered(ep, ev->session, data, ev->len);
        break;
    default:
        s = soe_send_unreliable(ep, ev->session, data, ev->len);
        break;
    }
    if (s == SOE_ERR_QUEUE_FULL) {
        return 0;
    }
    /* A session that closed meanwhile takes nothing more: not an error for an echo. */
    if (s != SOE_ERR_STALE_SESSION && s != SOE_ERR_CLOSED) {
        check(s, "send");
    }
    return 1;
}

int main(int argc, char **argv) {
    int port = 0;
    const char *key = NULL;
    const char *protocol = "SoeEcho";
    long want_closed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            port = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--key") && i + 1 < argc) {
            key = argv[++i];
        } else if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
            protocol = argv[++i];
        } else if (!strcmp(argv[i], "--sessions") && i + 1 < argc) {
            want_closed = atol(argv[++i]);
        } else {
            fprintf(stderr, "usage: echo_server [--port P] [--key TEXT] [--protocol NAME] "
                            "[--sessions N]\n");
            return 2;
        }
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    soe_config *config = NULL;
    check(soe_config_new(SOE_ROLE_SERVER, &config), "config");
    check(soe_config_set_application_protocol(config, protocol), "protocol");
    if (key) {
        check(soe_config_set_rc4_key(config, (const uint8_t *)key, strlen(key)), "key");
    }
    soe_endpoint *ep = NULL;
    check(soe_endpoint_new(config, now_us(), &ep), "endpoint");
    soe_config_free(config);

    int fd = udp_socket();
    struct sockaddr_in bind_addr = {0};
    bind_addr.sin_family = AF_INET;
    bind_addr.sin_port = htons((uint16_t)port);
    bind_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t bind_len = sizeof bind_addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&bind_addr, sizeof bind_addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&bind_addr, &bind_len) != 0) {
        perror("echo_server: socket");
        return 1;
    }
    printf("listening on 127.0.0.1:%d\n", ntohs(bind_addr.sin_port));
    fflush(stdout);

    uint8_t datagram[65536];
    size_t cap = 4096;
    uint8_t *message = malloc(cap);
    struct held held = {0};
    long accepted = 0, closed = 0, echoed = 0;
    while (!stop && (want_closed == 0 || closed < want_closed)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        poll(&pfd, 1, poll_timeout_ms(ep, 1000));
        uint64_t now = now_us();
        check(receive_all(fd, ep, now, datagram, sizeof datagram), "datagram");
        check(soe_endpoint_handle_timeout(ep, now), "timeout");

        /* A held message goes first; while it waits, no more events are taken (back-pressure). */
        if (held.full && echo(ep, &held.event, held.data)) {
            free(held.data);
            held.full = 0;
            echoed++;
        }
        while (!held.full) {
            soe_event ev;
            soe_status s = soe_endpoint_poll_event(ep, &ev, message, cap);
            if (s == SOE_DONE) {
                break;
            }
            if (s == SOE_ERR_BUFFER_TOO_SMALL) {
                cap = ev.len;
                message = realloc(message, cap);
                continue;
            }
            check(s, "event");
            if (ev.kind == SOE_EVENT_ACCEPTED) {
                accepted++;
            } else if (ev.kind == SOE_EVENT_CLOSED) {
                closed++;
                printf("session %llu closed: reason %u, by peer %u\n",
                       (unsigned long long)ev.session, ev.reason, ev.by_peer);
            } else if (ev.kind == SOE_EVENT_MESSAGE) {
                if (echo(ep, &ev, message)) {
                    echoed++;
                } else {
                    held.full = 1;
                    held.event = ev;
                    held.data = malloc(ev.len ? ev.len : 1);
                    memcpy(held.data, message, ev.len);
                }
            }
        }

        check(send_all(fd, ep, now, datagram, sizeof datagram), "transmit");
    }
    printf("echo_server: %ld sessions accepted, %ld closed, %ld messages echoed\n", accepted,
           closed, echoed);
    if (stop) {
        /* Say goodbye to every peer before the endpoint goes: free it with sessions open and
         * they learn of it only from their idle timeout. */
        size_t open = 0;
        check(soe_endpoint_session_count(ep, &open), "count");
        size_t left = close_all_and_drain(fd, ep, datagram, sizeof datagram, 10000);
        printf("echo_server: shutdown: %zu sessions closed, %zu left\n", open - left, left);
    }
    if (held.full) {
        free(held.data);
    }
    free(message);
    soe_endpoint_free(ep);
    socket_close(fd);
    return 0;
}
