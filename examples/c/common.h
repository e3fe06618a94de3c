/*
 * What both C examples share: the monotonic clock in microseconds, and conversion between
 * struct sockaddr_in and soe_addr. Plain POSIX; nothing here is part of the library.
 */
#ifndef SOE_EXAMPLE_COMMON_H
#define SOE_EXAMPLE_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>

#include "soe.h"

/* The host's monotonic clock, in microseconds: the time every soe_* call takes. */
static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void addr_to_soe(const struct sockaddr_in *in, soe_addr *out) {
    memset(out, 0, sizeof *out);
    out->family = SOE_AF_INET;
    out->port = ntohs(in->sin_port);
    memcpy(out->ip, &in->sin_addr.s_addr, 4);
}

static void addr_from_soe(const soe_addr *a, struct sockaddr_in *out) {
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons(a->port);
    memcpy(&out->sin_addr.s_addr, a->ip, 4);
}

/* Milliseconds until the endpoint's next deadline (at most `cap`), for poll(). */
static int poll_timeout_ms(soe_endpoint *ep, int cap) {
    uint64_t deadline;
    if (soe_endpoint_next_timeout(ep, &deadline) != SOE_OK) {
        return cap;
    }
    uint64_t now = now_us();
    if (deadline <= now) {
        return 0;
    }
    uint64_t ms = (deadline - now + 999) / 1000;
    return ms < (uint64_t)cap ? (int)ms : cap;
}

#endif
