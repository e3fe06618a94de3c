/*
 * The flight recorder in C: a server endpoint that records every session and a client, in
 * memory, on the host's clock moved by hand (virtual time). The client sends a message every
 * 100 ms for 20 s, the server answers each; then every datagram is lost, and the server's
 * session ends with reason 2 (Timeout). At its SOE_EVENT_CLOSED the server takes the
 * recording: the size first (SOE_ERR_BUFFER_TOO_SMALL), then the capture into a buffer of that
 * size, written to argv[1]; a second take finds nothing (SOE_DONE). A live session's recording
 * is taken too (soe_session_recording_file, argv[2]).
 *
 * `cargo xtask c-abi` runs it under valgrind, then reads argv[1] with tshark and the Lua
 * plugin and with `soe decode`: they must show the message this program prints last as the
 * last message the server got, and the timeout as the reason. It prints:
 *
 *   recording: closed: reason 2
 *   recording: last message: <hex of the server's last message before the loss>
 *   recording: <N> bytes written to <argv[1]>
 *   recording: ok
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soe.h"

#define REQUIRE(call, want)                                                                    \
    do {                                                                                       \
        soe_status got_ = (call);                                                              \
        if (got_ != (want)) {                                                                  \
            fprintf(stderr, "recording: line %d: %s returned %s (%s), expected %s\n",         \
                    __LINE__, #call, soe_status_name(got_), soe_last_error(),                  \
                    soe_status_name(want));                                                    \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static soe_addr addr(uint8_t last, uint16_t port) {
    soe_addr a;
    memset(&a, 0, sizeof a);
    a.family = SOE_AF_INET;
    a.port = port;
    a.ip[0] = 10;
    a.ip[3] = last;
    return a;
}

/* Moves every datagram `from` has to `to`, unless the link is down. */
static void carry(soe_endpoint *from, soe_endpoint *to, const soe_addr *source, uint64_t now,
                  int lossy) {
    static uint8_t buf[2048];
    size_t len;
    soe_addr dest;
    while (soe_endpoint_poll_transmit(from, now, buf, sizeof buf, &len, &dest) == SOE_OK) {
        if (!lossy) {
            REQUIRE(soe_endpoint_handle_datagram(to, now, source, buf, len), SOE_OK);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: recording CLOSED.pcapng LIVE.pcapng\n");
        return 2;
    }
    soe_config *server_config = NULL, *client_config = NULL;
    REQUIRE(soe_config_new(SOE_ROLE_SERVER, &server_config), SOE_OK);
    REQUIRE(soe_config_new(SOE_ROLE_CLIENT, &client_config), SOE_OK);
    REQUIRE(soe_config_set(server_config, SOE_OPT_RECORD_SESSIONS, 1), SOE_OK);
    REQUIRE(soe_config_set_application_protocol(server_config, "Recorded_1"), SOE_OK);
    REQUIRE(soe_config_set_application_protocol(client_config, "Recorded_1"), SOE_OK);
    uint64_t now = 1000000;
    soe_endpoint *server = NULL, *client = NULL;
    REQUIRE(soe_endpoint_new(server_config, now, &server), SOE_OK);
    REQUIRE(soe_endpoint_new(client_config, now, &client), SOE_OK);
    soe_config_free(server_config);
    soe_config_free(client_config);
    soe_addr s_addr = addr(2, 20260), c_addr = addr(1, 40000);
    soe_session to_server = 0;
    REQUIRE(soe_connect(client, now, &s_addr, &to_server), SOE_OK);

    static uint8_t event_buf[4096], last[4096];
    size_t last_len = 0;
    char text[128];
    int closed = 0, live_taken = 0;
    const uint64_t loss_at = now + 20000000;
    for (int step = 0; !closed; step++) {
        if (step > 200000) {
            fprintf(stderr, "recording: the server's session never ended\n");
            return 1;
        }
        now += 10000; /* 10 ms */
        int lossy = now >= loss_at;
        if (!lossy && step % 10 == 0) {
            int n = snprintf(text, sizeof text, "client message %d: position=12.5,0.0,-3.25", step / 10);
            REQUIRE(soe_send(client, to_server, 0, (const uint8_t *)text, (size_t)n), SOE_OK);
        }
        REQUIRE(soe_endpoint_handle_timeout(client, now), SOE_OK);
        REQUIRE(soe_endpoint_handle_timeout(server, now), SOE_OK);
        carry(client, server, &c_addr, now, lossy);
        carry(server, client, &s_addr, now, lossy);
        soe_event ev;
        while (soe_endpoint_poll_event(client, &ev, event_buf, sizeof event_buf) == SOE_OK) {
        }
        soe_status st;
        while ((st = soe_endpoint_poll_event(server, &ev, event_buf, sizeof event_buf)) == SOE_OK) {
            if (ev.kind == SOE_EVENT_MESSAGE) {
                memcpy(last, event_buf, ev.len);
                last_len = ev.len;
                REQUIRE(soe_send(server, ev.session, 0, (const uint8_t *)"ack", 3), SOE_OK);
                if (!live_taken && step > 500) {
                    /* A live session's recording so far, to a file; it goes on recording. */
                    REQUIRE(soe_session_recording_file(server, ev.session, now, &s_addr, 0, argv[2]),
                            SOE_OK);
                    live_taken = 1;
                }
            } else if (ev.kind == SOE_EVENT_CLOSED) {
                printf("recording: closed: reason %u\n", ev.reason);
                size_t need = 0;
                REQUIRE(soe_session_recording(server, ev.session, now, &s_addr, 0, NULL, 0, &need),
                        SOE_ERR_BUFFER_TOO_SMALL);
                uint8_t *capture = malloc(need);
                size_t len = 0;
                REQUIRE(soe_session_recording(server, ev.session, now, &s_addr, 0, capture, need, &len),
                        SOE_OK);
                REQUIRE(soe_session_recording(server, ev.session, now, &s_addr, 0, capture, need, &len),
                        SOE_DONE);
                FILE *f = fopen(argv[1], "wb");
                if (f == NULL || fwrite(capture, 1, need, f) != need || fclose(f) != 0) {
                    fprintf(stderr, "recording: cannot write %s\n", argv[1]);
                    return 1;
                }
                printf("recording: last message: ");
                for (size_t i = 0; i < last_len; i++) {
                    printf("%02x", last[i]);
                }
                printf("\nrecording: %zu bytes written to %s\n", need, argv[1]);
                free(capture);
                closed = 1;
            }
        }
        REQUIRE(st, SOE_DONE);
    }
    soe_endpoint_free(server);
    soe_endpoint_free(client);
    if (!live_taken) {
        fprintf(stderr, "recording: no live recording was taken\n");
        return 1;
    }
    printf("recording: ok\n");
    return 0;
}
