/*
 * The C ABI's error paths, from C: every misuse returns its documented status and explains
 * itself through soe_last_error(). Two endpoints talk in memory (no sockets); time is faked.
 * Exits 0 when every check holds, 1 with a line per failed check otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soe.h"

static int failures;

#define EXPECT(call, want)                                                                     \
    do {                                                                                       \
        soe_status got_ = (call);                                                              \
        if (got_ != (want)) {                                                                  \
            fprintf(stderr, "line %d: %s returned %s, expected %s (%s)\n", __LINE__, #call,     \
                    soe_status_name(got_), soe_status_name(want), soe_last_error());           \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "line %d: %s does not hold\n", __LINE__, #cond);                    \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

static soe_addr addr(uint8_t last, uint16_t port) {
    soe_addr a;
    memset(&a, 0, sizeof a);
    a.family = SOE_AF_INET;
    a.port = port;
    a.ip[0] = 127;
    a.ip[3] = last;
    return a;
}

static uint64_t now = 1000000;

/* Moves every datagram `from` wants to send to `to`, as if from `source`. */
static void pump_one(soe_endpoint *from, soe_endpoint *to, soe_addr source) {
    uint8_t buf[65536];
    size_t len;
    soe_addr dest;
    while (soe_endpoint_poll_transmit(from, now, buf, sizeof buf, &len, &dest) == SOE_OK) {
        EXPECT(soe_endpoint_handle_datagram(to, now, &source, buf, len), SOE_OK);
    }
}

static void pump(soe_endpoint *client, soe_endpoint *server, soe_addr c, soe_addr s, int rounds) {
    for (int i = 0; i < rounds; i++) {
        now += 5000;
        soe_endpoint_handle_timeout(client, now);
        soe_endpoint_handle_timeout(server, now);
        pump_one(client, server, c);
        pump_one(server, client, s);
    }
}

/* Takes events until one of `kind` arrives (0: none found). */
static int wait_event(soe_endpoint *ep, uint32_t kind, soe_event *out) {
    uint8_t buf[65536];
    while (soe_endpoint_poll_event(ep, out, buf, sizeof buf) == SOE_OK) {
        if ((uint32_t)out->kind == kind) {
            return 1;
        }
    }
    return 0;
}

int main(void) {
    soe_config *base = NULL;
    soe_endpoint *ep = NULL;

    /* NULL pointers. */
    EXPECT(soe_config_new(SOE_ROLE_SERVER, NULL), SOE_ERR_NULL);
    CHECK(strstr(soe_last_error(), "NULL") != NULL);
    EXPECT(soe_config_new(7, &base), SOE_ERR_INVALID_CONFIG);
    CHECK(base == NULL);
    EXPECT(soe_config_new(SOE_ROLE_SERVER, &base), SOE_OK);
    CHECK(soe_last_error()[0] == '\0');
    CHECK(strcmp(soe_version(), SOE_VERSION_STRING) == 0);
    CHECK(soe_abi_version() == SOE_ABI_VERSION);
    EXPECT(soe_endpoint_new(NULL, now, &ep), SOE_ERR_NULL);
    EXPECT(soe_endpoint_new(base, now, NULL), SOE_ERR_NULL);
    EXPECT(soe_config_set(NULL, SOE_OPT_UDP_LENGTH, 512), SOE_ERR_NULL);
    soe_addr a = addr(1, 1000);
    uint8_t buf[2048];
    size_t len = 0;
    soe_event ev;
    uint64_t deadline;
    EXPECT(soe_endpoint_handle_datagram(NULL, now, &a, buf, 4), SOE_ERR_NULL);
    EXPECT(soe_endpoint_poll_transmit(NULL, now, buf, sizeof buf, &len, &a), SOE_ERR_NULL);
    EXPECT(soe_endpoint_poll_event(NULL, &ev, buf, sizeof buf), SOE_ERR_NULL);
    EXPECT(soe_endpoint_next_timeout(NULL, &deadline), SOE_ERR_NULL);
    EXPECT(soe_endpoint_handle_timeout(NULL, now), SOE_ERR_NULL);
    EXPECT(soe_send(NULL, 1, 0, buf, 1), SOE_ERR_NULL);
    EXPECT(soe_close(NULL, now, 1, SOE_REASON_APPLICATION), SOE_ERR_NULL);
    EXPECT(soe_close_all(NULL, now, SOE_REASON_APPLICATION, 0), SOE_ERR_NULL);
    soe_endpoint_free(NULL); /* ignored */
    soe_config_free(NULL);   /* ignored */

    /* Invalid options: refused, naming the option, and the option left as it was. */
    struct {
        const char *field;
        soe_option option;
        int64_t value;
    } bad[] = {
        {"SOE_OPT_UDP_LENGTH", SOE_OPT_UDP_LENGTH, 10},
        {"SOE_OPT_UDP_LENGTH", SOE_OPT_UDP_LENGTH, 100000},
        {"SOE_OPT_CRC_LENGTH", SOE_OPT_CRC_LENGTH, 3},
        {"SOE_OPT_COMPRESSION", SOE_OPT_COMPRESSION, 2},
        {"SOE_OPT_MAX_SESSIONS", SOE_OPT_MAX_SESSIONS, 0},
        {"SOE_OPT_MAX_MESSAGE_SIZE", SOE_OPT_MAX_MESSAGE_SIZE, 0},
        {"SOE_OPT_RC4_AT_START", SOE_OPT_RC4_AT_START, 5},
        {"SOE_OPT_MAX_MESSAGE_SIZE", SOE_OPT_MAX_MESSAGE_SIZE, SOE_MAX_MESSAGE_SIZE + 1},
        {"SOE_OPT_CONNECT_TIMEOUT_MS", SOE_OPT_CONNECT_TIMEOUT_MS, SOE_NEVER},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t before = 0, after = 1;
        EXPECT(soe_config_get(base, bad[i].option, &before), SOE_OK);
        EXPECT(soe_config_set(base, bad[i].option, bad[i].value), SOE_ERR_INVALID_CONFIG);
        if (strstr(soe_last_error(), bad[i].field) == NULL) {
            fprintf(stderr, "option %zu: message \"%s\" does not name %s\n", i, soe_last_error(),
                    bad[i].field);
            failures++;
        }
        EXPECT(soe_config_get(base, bad[i].option, &after), SOE_OK);
        CHECK(before == after);
    }
    /* An option from a newer header. */
    EXPECT(soe_config_set(base, 999, 1), SOE_ERR_UNKNOWN_OPTION);
    /* Keys: too long, and an underflowed length, refused before a byte is read. */
    EXPECT(soe_config_set_rc4_key(base, buf, 300), SOE_ERR_INVALID_CONFIG);
    CHECK(strstr(soe_last_error(), "rc4_key_len") != NULL);
    EXPECT(soe_config_set_rc4_key(base, buf, (size_t)0 - 4), SOE_ERR_INVALID_CONFIG);
    /* A protocol name whose SessionRequest cannot fit udp_length: refused at endpoint_new. */
    {
        soe_config *tight = NULL;
        char name[201];
        memset(name, 'n', 200);
        name[200] = '\0';
        EXPECT(soe_config_new(SOE_ROLE_CLIENT, &tight), SOE_OK);
        EXPECT(soe_config_set(tight, SOE_OPT_UDP_LENGTH, 64), SOE_OK);
        EXPECT(soe_config_set_application_protocol(tight, name), SOE_OK);
        ep = (soe_endpoint *)&a; /* must be overwritten with NULL */
        EXPECT(soe_endpoint_new(tight, now, &ep), SOE_ERR_INVALID_CONFIG);
        CHECK(ep == NULL);
        CHECK(strstr(soe_last_error(), "SOE_OPT_UDP_LENGTH") != NULL);
        soe_config_free(tight);
    }

    /* Two endpoints that talk in memory. */
    soe_config *client_config = NULL;
    EXPECT(soe_config_set(base, SOE_OPT_MAX_QUEUED_MESSAGES, 4), SOE_OK);
    EXPECT(soe_config_new(SOE_ROLE_CLIENT, &client_config), SOE_OK);
    EXPECT(soe_config_set(client_config, SOE_OPT_MAX_MESSAGE_SIZE, 1000), SOE_OK);
    EXPECT(soe_config_set(client_config, SOE_OPT_MAX_QUEUED_MESSAGES, 4), SOE_OK);
    soe_endpoint *server = NULL, *client = NULL;
    EXPECT(soe_endpoint_new(base, now, &server), SOE_OK);
    EXPECT(soe_endpoint_new(client_config, now, &client), SOE_OK);
    soe_config_free(base);
    soe_config_free(client_config);
    soe_addr s_addr = addr(1, 20042), c_addr = addr(2, 40000);
    soe_session session = 0;
    EXPECT(soe_connect(client, now, NULL, &session), SOE_ERR_NULL);
    EXPECT(soe_connect(client, now, &s_addr, &session), SOE_OK);
    CHECK(session != 0);
    EXPECT(soe_connect(client, now, &s_addr, &session), SOE_ERR_CONNECT);

    /* A NULL buffer keeps the datagram (the SessionRequest) for the next call. */
    size_t needed = 0;
    soe_addr dest;
    EXPECT(soe_endpoint_poll_transmit(client, now, NULL, sizeof buf, &needed, &dest), SOE_ERR_NULL);
    /* A datagram larger than the caller's buffer waits for a bigger one. */
    EXPECT(soe_endpoint_poll_transmit(client, now, buf, 4, &needed, &dest), SOE_ERR_BUFFER_TOO_SMALL);
    CHECK(needed > 4);
    EXPECT(soe_endpoint_poll_transmit(client, now, buf, sizeof buf, &len, &dest), SOE_OK);
    CHECK(len == needed);
    CHECK(dest.family == SOE_AF_INET && dest.port == 20042);
    EXPECT(soe_endpoint_handle_datagram(server, now, &c_addr, buf, len), SOE_OK);
    pump(client, server, c_addr, s_addr, 3);
    CHECK(wait_event(client, SOE_EVENT_CONNECTED, &ev));
    EXPECT(soe_endpoint_next_timeout(client, &deadline), SOE_OK);
    CHECK(deadline >= now && deadline < now + 60000000u); /* on the host clock */

    /* Bad arguments. */
    soe_addr bad_family = a;
    bad_family.family = 5;
    EXPECT(soe_endpoint_handle_datagram(server, now, &bad_family, buf, 4), SOE_ERR_INVALID_ARGUMENT);
    EXPECT(soe_send(client, session, 4, buf, 1), SOE_ERR_INVALID_ARGUMENT);
    EXPECT(soe_send(client, session, 0, NULL, 5), SOE_ERR_NULL);
    EXPECT(soe_send(client, 12345, 0, buf, 1), SOE_ERR_STALE_SESSION);
    EXPECT(soe_send(client, 0, 0, buf, 1), SOE_ERR_STALE_SESSION);
    /* Lengths that underflowed in C are refused before a byte is read. */
    size_t header = 4, got = 2;
    EXPECT(soe_send(client, session, 0, buf, got - header), SOE_ERR_MESSAGE_TOO_LARGE);
    EXPECT(soe_send_unreliable(client, session, buf, got - header), SOE_ERR_MESSAGE_TOO_LARGE);
    EXPECT(soe_send_ordered(client, session, buf, got - header), SOE_ERR_MESSAGE_TOO_LARGE);
    EXPECT(soe_endpoint_handle_datagram(server, now, &c_addr, buf, got - header), SOE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(soe_last_error(), "65535") != NULL);
    /* A close reason that is none. */
    EXPECT(soe_close(client, now, session, 17), SOE_ERR_INVALID_ARGUMENT);

    /* RC4 cannot be switched on for a session of an endpoint without a key. */
    EXPECT(soe_set_encryption(client, session, 1), SOE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(soe_last_error(), "rc4_key") != NULL);
    EXPECT(soe_set_encryption(NULL, session, 1), SOE_ERR_NULL);
    EXPECT(soe_set_encryption(client, 999, 1), SOE_ERR_STALE_SESSION);

    /* Oversize messages. */
    memset(buf, 0x41, sizeof buf);
    EXPECT(soe_send(client, session, 0, buf, 1001), SOE_ERR_MESSAGE_TOO_LARGE);
    EXPECT(soe_send_unreliable(client, session, buf, 600), SOE_ERR_MESSAGE_TOO_LARGE);
    uint8_t zero_first[3] = {0, 1, 2};
    EXPECT(soe_send_unreliable(client, session, zero_first, 3), SOE_ERR_MESSAGE_TOO_LARGE);
    EXPECT(soe_send_unreliable(client, session, buf, 0), SOE_ERR_MESSAGE_TOO_LARGE);

    /* A full send queue is back-pressure, and capacity says so. */
    size_t capacity = 99;
    EXPECT(soe_send_capacity(client, session, 0, &capacity), SOE_OK);
    CHECK(capacity == 4);
    int queued = 0;
    soe_status s;
    while ((s = soe_send(client, session, 1, buf, 100)) == SOE_OK && queued < 100) {
        queued++;
    }
    CHECK(s == SOE_ERR_QUEUE_FULL);
    CHECK(queued >= 4);

    /* An event larger than the caller's buffer waits for a bigger one. */
    pump(client, server, c_addr, s_addr, 10);
    soe_session accepted = 0;
    uint8_t small[10];
    int messages = 0;
    for (;;) {
        s = soe_endpoint_poll_event(server, &ev, small, sizeof small);
        if (s == SOE_DONE) {
            break;
        }
        if (ev.kind == SOE_EVENT_ACCEPTED) {
            accepted = ev.session;
            continue;
        }
        CHECK(s == SOE_ERR_BUFFER_TOO_SMALL);
        CHECK(ev.kind == SOE_EVENT_MESSAGE && ev.len == 100 && ev.channel == 1);
        uint8_t big[100];
        EXPECT(soe_endpoint_poll_event(server, &ev, big, sizeof big), SOE_OK);
        CHECK(ev.len == 100 && big[0] == 0x41 && big[99] == 0x41);
        messages++;
    }
    CHECK(accepted != 0);
    CHECK(messages == queued);

    soe_stats stats;
    EXPECT(soe_session_stats(client, session, NULL), SOE_ERR_NULL);
    EXPECT(soe_session_stats(client, session, &stats), SOE_OK);
    CHECK(stats.reliable_messages_sent == (uint64_t)queued);
    size_t count = 0;
    EXPECT(soe_endpoint_session_count(server, &count), SOE_OK);
    CHECK(count == 1);

    /* Close: the handle stays valid until SOE_EVENT_CLOSED is taken, then it is stale. */
    EXPECT(soe_close(client, now, session, SOE_REASON_APPLICATION), SOE_OK);
    EXPECT(soe_send(client, session, 0, buf, 1), SOE_ERR_CLOSED);
    pump(client, server, c_addr, s_addr, 20);
    CHECK(wait_event(client, SOE_EVENT_CLOSED, &ev));
    CHECK(ev.reason == 6 && ev.by_peer == 0);
    CHECK(wait_event(server, SOE_EVENT_CLOSED, &ev));
    CHECK(ev.session == accepted && ev.reason == 6 && ev.by_peer == 1);
    EXPECT(soe_send(client, session, 0, buf, 1), SOE_ERR_STALE_SESSION);
    EXPECT(soe_session_stats(client, session, &stats), SOE_ERR_STALE_SESSION);
    EXPECT(soe_close(client, now, session, SOE_REASON_APPLICATION), SOE_ERR_STALE_SESSION);
    EXPECT(soe_send(server, accepted, 0, buf, 1), SOE_ERR_STALE_SESSION);
    CHECK(strstr(soe_last_error(), "does not exist") != NULL);

    /* Names. */
    CHECK(strcmp(soe_status_name(SOE_ERR_BUFFER_TOO_SMALL), "SOE_ERR_BUFFER_TOO_SMALL") == 0);
    CHECK(strcmp(soe_status_name(1234), "SOE_UNKNOWN") == 0);
    CHECK(strlen(soe_version()) > 0);

    soe_endpoint_free(client);
    soe_endpoint_free(server);
    if (failures) {
        fprintf(stderr, "error_paths: %d checks failed\n", failures);
        return 1;
    }
    printf("error_paths: every check held\n");
    return 0;
}
