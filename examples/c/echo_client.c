/*
 * An SOE echo client in C on the soe-ffi C ABI: connects to an echo server, sends COUNT
 * reliable messages (every fourth one SIZE bytes, which travels as fragments; the others
 * smaller), checks that each echo comes back once, in order, byte for byte, then closes the
 * session and waits for its end.
 *
 *   echo_client HOST PORT [--key TEXT] [--protocol NAME] [--count N] [--size B] [--depth D]
 *
 * Exits 0 when every echo matched and the session closed cleanly; 1 otherwise (30 s at most).
 */
#define _POSIX_C_SOURCE 200809L
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
        fprintf(stderr, "echo_client: %s: %s: %s\n", what, soe_status_name(status),
                soe_last_error());
        exit(1);
    }
}

/* Message `i`: its length and its bytes, both derived from `i`. */
static size_t message_len(long i, size_t size) {
    return i % 4 == 0 ? size : 1 + (size_t)(i * 131) % (size < 400 ? size : 400);
}

static void message_fill(long i, uint8_t *out, size_t len) {
    for (size_t j = 0; j < len; j++) {
        out[j] = (uint8_t)(i * 31 + (long)j * 7);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: echo_client HOST PORT [--key TEXT] [--protocol NAME] "
                        "[--count N] [--size B] [--depth D]\n");
        return 2;
    }
    const char *key = NULL;
    const char *protocol = "SoeEcho";
    long count = 100, depth = 8;
    size_t size = 20000;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--key") && i + 1 < argc) {
            key = argv[++i];
        } else if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
            protocol = argv[++i];
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            count = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            size = (size_t)atol(argv[++i]);
        } else if (!strcmp(argv[i], "--depth") && i + 1 < argc) {
            depth = atol(argv[++i]);
        } else {
            fprintf(stderr, "echo_client: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (size == 0 || depth < 1) {
        fprintf(stderr, "echo_client: --size and --depth must be at least 1\n");
        return 2;
    }

    struct sockaddr_in server = {0};
    server.sin_family = AF_INET;
    server.sin_port = htons((uint16_t)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &server.sin_addr) != 1) {
        fprintf(stderr, "echo_client: %s is not an IPv4 address\n", argv[1]);
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int fd = udp_socket();
    if (fd < 0) {
        perror("echo_client: socket");
        return 1;
    }

    soe_config *config = NULL;
    check(soe_config_new(SOE_ROLE_CLIENT, &config), "config");
    check(soe_config_set_application_protocol(config, protocol), "protocol");
    if (key) {
        check(soe_config_set_rc4_key(config, (const uint8_t *)key, strlen(key)), "key");
    }
    soe_endpoint *ep = NULL;
    check(soe_endpoint_new(config, now_us(), &ep), "endpoint");
    soe_config_free(config);
    soe_addr server_addr;
    addr_to_soe(&server, &server_addr);
    soe_session session;
    uint64_t started = now_us();
    check(soe_connect(ep, started, &server_addr, &session), "connect");

    uint8_t datagram[65536];
    size_t cap = size;
    uint8_t *message = malloc(cap);
    uint8_t *expected = malloc(size);
    long sent = 0, received = 0;
    int connected = 0, closing = 0, done = 0, failed = 0;
    while (!done && !stop) {
        if (now_us() - started > 30u * 1000000u) {
            fprintf(stderr, "echo_client: gave up after 30 s (%ld of %ld echoes)\n", received, count);
            failed = 1;
            break;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        poll(&pfd, 1, poll_timeout_ms(ep, 100));
        uint64_t now = now_us();
        check(receive_all(fd, ep, now, datagram, sizeof datagram), "datagram");
        check(soe_endpoint_handle_timeout(ep, now), "timeout");

        for (;;) {
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
            if (ev.kind == SOE_EVENT_CONNECTED) {
                connected = 1;
            } else if (ev.kind == SOE_EVENT_MESSAGE) {
                size_t len = message_len(received, size);
                message_fill(received, expected, len);
                if (ev.delivery != SOE_DELIVERY_RELIABLE || ev.len != len ||
                    memcmp(message, expected, len) != 0) {
                    fprintf(stderr, "echo_client: echo %ld differs (%zu bytes, %zu expected)\n",
                            received, ev.len, len);
                    failed = 1;
                }
                received++;
            } else if (ev.kind == SOE_EVENT_CLOSED) {
                if (!closing || ev.reason != 6 || ev.by_peer) {
                    fprintf(stderr, "echo_client: session closed: reason %u, by peer %u\n",
                            ev.reason, ev.by_peer);
                    failed = 1;
                }
                done = 1;
            }
        }

        while (connected && !closing && sent < count && sent - received < depth) {
            size_t len = message_len(sent, size);
            uint8_t *out = malloc(len);
            message_fill(sent, out, len);
            soe_status s = soe_send(ep, session, 0, out, len);
            free(out);
            if (s == SOE_ERR_QUEUE_FULL) {
                break;
            }
            check(s, "send");
            sent++;
        }
        if (connected && !closing && received == count) {
            soe_stats stats;
            check(soe_session_stats(ep, session, &stats), "stats");
            printf("echo_client: %ld echoes verified; rtt %llu us, %llu resends\n", received,
                   (unsigned long long)stats.rtt_us, (unsigned long long)stats.resends);
            check(soe_close(ep, now, session, SOE_REASON_APPLICATION), "close");
            closing = 1;
        }

        check(send_all(fd, ep, now, datagram, sizeof datagram), "transmit");
    }
    if (stop) {
        /* Interrupted: close the session and send its Disconnect before freeing the endpoint. */
        close_all_and_drain(fd, ep, datagram, sizeof datagram, 10000);
        failed = 1;
    }
    /* The handle is stale once its Closed event was taken. */
    if (!failed && soe_send(ep, session, 0, (const uint8_t *)"x", 1) != SOE_ERR_STALE_SESSION) {
        fprintf(stderr, "echo_client: a closed session's handle was not reported stale\n");
        failed = 1;
    }
    free(message);
    free(expected);
    soe_endpoint_free(ep);
    socket_close(fd);
    if (!failed) {
        printf("echo_client: closed cleanly\n");
    }
    return failed;
}
