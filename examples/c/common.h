/*
 * What both C examples share: the monotonic clock in microseconds, conversion between struct
 * sockaddr_in and soe_addr, the socket, and the two halves of the loop that move datagrams
 * between the socket and the endpoint. Plain POSIX, and Winsock on Windows (MinGW-w64: the
 * block under _WIN32 below); nothing here is part of the library.
 */
#ifndef SOE_EXAMPLE_COMMON_H
#define SOE_EXAMPLE_COMMON_H

#include <string.h>

#ifdef _WIN32
/* Winsock in the examples' POSIX shapes: WSAPoll for poll(), a non-blocking socket (set in
 * udp_socket) for MSG_DONTWAIT, closesocket(), QueryPerformanceCounter for the clock. The
 * examples keep a socket in an int: a Winsock SOCKET is a kernel handle, and those fit in 32
 * bits. */
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0600 /* WSAPoll: Windows Vista and later */
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#define poll(fds, n, timeout) WSAPoll((fds), (ULONG)(n), (timeout))
#define MSG_DONTWAIT 0
typedef int soe_sock_len;
typedef char soe_sock_byte;
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
typedef size_t soe_sock_len;
typedef uint8_t soe_sock_byte;
#endif

#include "soe.h"

/* The host's monotonic clock, in microseconds: the time every soe_* call takes. */
static uint64_t now_us(void) {
#ifdef _WIN32
    LARGE_INTEGER count, frequency;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&frequency);
    return (uint64_t)(count.QuadPart / frequency.QuadPart) * 1000000u +
           (uint64_t)(count.QuadPart % frequency.QuadPart) * 1000000u /
               (uint64_t)frequency.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
#endif
}

/* Closes a socket of udp_socket(). */
static inline void socket_close(int fd) {
#ifdef _WIN32
    closesocket((SOCKET)fd);
#else
    close(fd);
#endif
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

/* A UDP socket with room for bursts (a few sessions' windows of fragments arrive at once);
 * -1 on failure. */
static int udp_socket(void) {
#ifdef _WIN32
    WSADATA wsa;
    if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) {
        return -1;
    }
    SOCKET s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s == INVALID_SOCKET) {
        return -1;
    }
    int fd = (int)s;
    u_long nonblocking = 1; /* the receive loop reads until the queue is empty */
    ioctlsocket(s, FIONBIO, &nonblocking);
#else
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
#endif
    if (fd >= 0) {
        int rcvbuf = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, (const void *)&rcvbuf, sizeof rcvbuf);
    }
    return fd;
}

/* Hands every datagram waiting on `fd` to the endpoint (`buf` holds one); the first error, or
 * SOE_OK. */
static soe_status receive_all(int fd, soe_endpoint *ep, uint64_t now, uint8_t *buf, size_t cap) {
    for (;;) {
        struct sockaddr_in from;
        socklen_t from_len = sizeof from;
        long n = (long)recvfrom(fd, (soe_sock_byte *)buf, (soe_sock_len)cap, MSG_DONTWAIT,
                                (struct sockaddr *)&from, &from_len);
        if (n < 0) {
            return SOE_OK;
        }
        soe_addr source;
        addr_to_soe(&from, &source);
        soe_status s = soe_endpoint_handle_datagram(ep, now, &source, buf, (size_t)n);
        if (s < 0) {
            return s;
        }
    }
}

/* Sends every datagram the endpoint has (`buf` of `cap` bytes holds one); the first error, or
 * SOE_OK. */
static soe_status send_all(int fd, soe_endpoint *ep, uint64_t now, uint8_t *buf, size_t cap) {
    for (;;) {
        size_t len;
        soe_addr to;
        soe_status s = soe_endpoint_poll_transmit(ep, now, buf, cap, &len, &to);
        if (s == SOE_DONE) {
            return SOE_OK;
        }
        if (s < 0) {
            return s;
        }
        struct sockaddr_in dest;
        addr_from_soe(&to, &dest);
        sendto(fd, (const soe_sock_byte *)buf, (soe_sock_len)len, 0, (struct sockaddr *)&dest,
               sizeof dest);
    }
}

/* Shutdown (on SIGINT, say): closes every session (gracefully: each still delivers what it has
 * queued, for up to SOE_OPT_CLOSE_TIMEOUT_MS) and drives the endpoint until none is left (every
 * Disconnect sent, every event taken), for at most `limit_ms`. Returns the sessions left: 0 when
 * the endpoint may be freed without leaving a peer to its timeout. */
static inline size_t close_all_and_drain(int fd, soe_endpoint *ep, uint8_t *buf, size_t cap,
                                         uint64_t limit_ms) {
    uint64_t start = now_us();
    size_t left = 0;
    soe_close_all(ep, start, SOE_REASON_APPLICATION, 0);
    for (;;) {
        uint64_t now = now_us();
        receive_all(fd, ep, now, buf, cap);
        soe_endpoint_handle_timeout(ep, now);
        soe_event ev; /* messages that arrive now are dropped; one too large for buf ends it */
        while (soe_endpoint_poll_event(ep, &ev, buf, cap) == SOE_OK) {
        }
        send_all(fd, ep, now, buf, cap);
        soe_endpoint_session_count(ep, &left);
        if (left == 0 || now - start > limit_ms * 1000u) {
            return left;
        }
        struct pollfd pfd; /* no designated initializer: C++17 includes this file too */
        pfd.fd = fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        poll(&pfd, 1, poll_timeout_ms(ep, 50));
    }
}

#endif
