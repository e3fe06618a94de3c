/*
 * The C ABI during teardown: called from a thread's pthread-key destructor and from an atexit
 * handler, after the library's thread-locals are gone (glibc runs thread_local destructors
 * before both). A whole session runs in each: create two endpoints, handshake, a compressed
 * message, an error and its message, a close, free.
 *
 * Before the fix, the first call from an atexit handler aborted the process (a Rust panic in a
 * function that cannot unwind: exit 134), and handlers registered earlier never ran. So this
 * program proves its handlers ran by their output, which `cargo xtask c-abi` checks:
 *
 *   teardown: thread: ok
 *   teardown: thread-key destructor: ok
 *   teardown: main: ok
 *   teardown: atexit handler: ok
 *   teardown: the atexit handler registered first ran
 *
 * and by its exit status (0; 1 when a check fails).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "soe.h"

static soe_addr addr(uint8_t last, uint16_t port) {
    soe_addr a;
    memset(&a, 0, sizeof a);
    a.family = SOE_AF_INET;
    a.port = port;
    a.ip[0] = 127;
    a.ip[3] = last;
    return a;
}

/* Prints why `call` did not return `want`, then returns 0 from the enclosing function. */
#define REQUIRE(call, want)                                                                    \
    do {                                                                                       \
        soe_status got_ = (call);                                                              \
        if (got_ != (want)) {                                                                  \
            fprintf(stderr, "teardown: %s: line %d: %s returned %s (%s), expected %s\n",       \
                    label, __LINE__, #call, soe_status_name(got_), soe_last_error(),           \
                    soe_status_name(want));                                                    \
            return 0;                                                                          \
        }                                                                                      \
    } while (0)

/* A whole session between two endpoints in memory; 1 when every step did what it should. */
static int exercise(const char *label) {
    soe_config *server_config = NULL, *client_config = NULL;
    REQUIRE(soe_config_new(SOE_ROLE_SERVER, &server_config), SOE_OK);
    REQUIRE(soe_config_new(SOE_ROLE_CLIENT, &client_config), SOE_OK);
    /* framing's zlib state is a thread-local too */
    REQUIRE(soe_config_set(server_config, SOE_OPT_COMPRESSION, 1), SOE_OK);
    soe_endpoint *server = NULL, *client = NULL;
    uint64_t now = 1000000;
    REQUIRE(soe_endpoint_new(server_config, now, &server), SOE_OK);
    REQUIRE(soe_endpoint_new(client_config, now, &client), SOE_OK);
    soe_config_free(server_config);
    soe_config_free(client_config);
    soe_addr s_addr = addr(1, 20042), c_addr = addr(2, 40000);
    soe_session session = 0;
    REQUIRE(soe_connect(client, now, &s_addr, &session), SOE_OK);
    static uint8_t message[400], buf[2048];
    memset(message, 'z', sizeof message);
    int got = 0;
    for (int round = 0; round < 20; round++) {
        now += 10000;
        if (round == 3) {
            REQUIRE(soe_send(client, session, 0, message, sizeof message), SOE_OK);
        }
        soe_endpoint *from[2] = {client, server}, *to[2] = {server, client};
        soe_addr source[2] = {c_addr, s_addr};
        for (int i = 0; i < 2; i++) {
            REQUIRE(soe_endpoint_handle_timeout(from[i], now), SOE_OK);
            size_t len;
            soe_addr dest;
            while (soe_endpoint_poll_transmit(from[i], now, buf, sizeof buf, &len, &dest) == SOE_OK) {
                REQUIRE(soe_endpoint_handle_datagram(to[i], now, &source[i], buf, len), SOE_OK);
            }
        }
        soe_event ev;
        while (soe_endpoint_poll_event(server, &ev, buf, sizeof buf) == SOE_OK) {
            if (ev.kind == SOE_EVENT_MESSAGE && ev.len == sizeof message &&
                memcmp(buf, message, sizeof message) == 0) {
                got++;
            }
        }
        while (soe_endpoint_poll_event(client, &ev, buf, sizeof buf) == SOE_OK) {
        }
    }
    if (got != 1) {
        fprintf(stderr, "teardown: %s: the message arrived %d times\n", label, got);
        return 0;
    }
    REQUIRE(soe_send(client, session, 9, message, 1), SOE_ERR_INVALID_ARGUMENT);
    if (soe_last_error() == NULL || soe_last_error()[0] == '\0') {
        fprintf(stderr, "teardown: %s: no message after an error\n", label);
        return 0;
    }
    REQUIRE(soe_close(client, now, session, SOE_REASON_APPLICATION), SOE_OK);
    soe_endpoint_free(client);
    soe_endpoint_free(server);
    return 1;
}

static void report(const char *label, int ok) {
    if (!ok) {
        fflush(stdout);
        _exit(1);
    }
    printf("teardown: %s: ok\n", label);
    fflush(stdout);
}

static pthread_key_t key;

static void key_destructor(void *value) {
    (void)value;
    report("thread-key destructor", exercise("thread-key destructor"));
}

static void *thread_main(void *arg) {
    (void)arg;
    /* The library's thread-locals of this thread come to life here... */
    report("thread", exercise("thread"));
    /* ...and are destroyed before the key's destructor runs. */
    pthread_setspecific(key, &key);
    return NULL;
}

static void registered_first(void) {
    printf("teardown: the atexit handler registered first ran\n");
    fflush(stdout);
}

static void registered_last(void) {
    report("atexit handler", exercise("atexit handler"));
}

int main(void) {
    atexit(registered_first);
    if (pthread_key_create(&key, key_destructor) != 0) {
        return 1;
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, thread_main, NULL) != 0 || pthread_join(thread, NULL) != 0) {
        return 1;
    }
    report("main", exercise("main"));
    /* Runs after main returns, when the main thread's thread-locals are already destroyed. */
    atexit(registered_last);
    return 0;
}
