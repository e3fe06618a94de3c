/* Every macro of soe.h, used in an expression, so that the header's constants are checked by the
 * compiler where they are used: built with -Wall -Wextra -Woverflow -Werror (C11 and C++17) by
 * `cargo xtask c-abi`, and with `cc -fsyntax-only` by `cargo test -p soe-ffi --test header`,
 * which also fails when a macro of the header is missing here.
 *
 * What it catches: a constant evaluated in `int` that overflows (SOE_MAX_DURATION_MS was
 * `(((365 * 24) * 3600) * 1000)`: undefined behaviour, read by gcc as 1,471,228,928), and a
 * negative macro without parentheses (`x-SOE_NEVER` was `x--1`, a decrement). */
#include "soe.h"

#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
#define SOE_CHECK(cond, what) static_assert(cond, what)
#else
#define SOE_CHECK(cond, what) _Static_assert(cond, what)
#endif

SOE_CHECK(SOE_MAX_DURATION_MS == 31536000000LL, "one year in milliseconds, in 64 bits");
SOE_CHECK(SOE_MAX_DURATION_MS / 1000 / 3600 / 24 == 365, "one year");
SOE_CHECK(sizeof(SOE_MAX_DURATION_MS) >= 8, "a 64-bit literal");
SOE_CHECK(SOE_NEVER == -1, "SOE_NEVER");
SOE_CHECK(1-SOE_NEVER == 2, "SOE_NEVER in parentheses");
SOE_CHECK(SOE_VERSION_NUMBER ==
              SOE_VERSION_MAJOR * 10000 + SOE_VERSION_MINOR * 100 + SOE_VERSION_PATCH,
          "version number");
SOE_CHECK(SOE_ABI_VERSION >= 1, "ABI version");

/* Each numeric macro, as the int64_t that soe_config_set and friends take. */
static const int64_t numeric[] = {
    SOE_AF_INET,
    SOE_AF_INET6,
    SOE_REASON_NONE,
    SOE_REASON_ICMP_ERROR,
    SOE_REASON_TIMEOUT,
    SOE_REASON_OTHER_SIDE_TERMINATED,
    SOE_REASON_MANAGER_DELETED,
    SOE_REASON_CONNECT_FAIL,
    SOE_REASON_APPLICATION,
    SOE_REASON_UNREACHABLE_CONNECTION,
    SOE_REASON_UNACKNOWLEDGED_TIMEOUT,
    SOE_REASON_NEW_CONNECTION_ATTEMPT,
    SOE_REASON_CONNECTION_REFUSED,
    SOE_REASON_CONNECT_ERROR,
    SOE_REASON_CONNECTING_TO_SELF,
    SOE_REASON_RELIABLE_OVERFLOW,
    SOE_REASON_APPLICATION_RELEASED,
    SOE_REASON_CORRUPT_PACKET,
    SOE_REASON_PROTOCOL_MISMATCH,
    SOE_ROLE_SERVER,
    SOE_ROLE_CLIENT,
    SOE_MAX_PROTOCOL_LENGTH,
    SOE_MAX_MESSAGE_SIZE,
    SOE_MAX_DATAGRAM_LENGTH,
    SOE_MAX_RC4_KEY_LENGTH,
    SOE_MAX_PATH_LENGTH,
    SOE_RECORDING_WITH_KEY,
    SOE_NEVER,
    SOE_MAX_DURATION_MS,
    SOE_VERSION_MAJOR,
    SOE_VERSION_MINOR,
    SOE_VERSION_PATCH,
    SOE_VERSION_NUMBER,
    SOE_ABI_VERSION,
    SOE_OPT_UDP_LENGTH,
    SOE_OPT_CRC_LENGTH,
    SOE_OPT_COMPRESSION,
    SOE_OPT_RC4_AT_START,
    SOE_OPT_MAX_SESSIONS,
    SOE_OPT_MAX_HALF_OPEN,
    SOE_OPT_MAX_MESSAGE_SIZE,
    SOE_OPT_MAX_QUEUED_MESSAGES,
    SOE_OPT_MAX_QUEUED_UNRELIABLE,
    SOE_OPT_IDLE_TIMEOUT_MS,
    SOE_OPT_CONNECT_TIMEOUT_MS,
    SOE_OPT_HEARTBEAT_INTERVAL_MS,
    SOE_OPT_CLOSE_TIMEOUT_MS,
    SOE_OPT_DISCONNECT_REPEATS,
    SOE_OPT_DISCONNECT_INTERVAL_MS,
    SOE_OPT_BUNDLE_MESSAGES,
    SOE_OPT_MAX_OUTSTANDING_BYTES,
    SOE_OPT_PRESET,
    SOE_OPT_RECORD_SESSIONS,
    SOE_OPT_RECORD_SESSION_BYTES,
    SOE_OPT_RECORD_ENDPOINT_BYTES,
    SOE_PRESET_NONE,
    SOE_PRESET_FREE_REALMS,
    SOE_PRESET_OSFR_LIBSOE,
    SOE_PRESET_H1Z1,
    SOE_PRESET_PLANETSIDE2,
};

int main(void) {
    /* The string macros, and SOE_H (the include guard) by name. */
    const char *version = SOE_VERSION_STRING;
    const char *stringified = SOE_STRINGIFY(SOE_VERSION_MAJOR) SOE_STRINGIFY_(x);
#ifndef SOE_H
#error "SOE_H is the include guard"
#endif
    long long sum = 0;
    for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++) {
        sum += numeric[i] / 1000;
    }
    /* The one-year limit survives arithmetic in 64 bits, and SOE_NEVER in any spelling. */
    long long twice = SOE_MAX_DURATION_MS * 2;
    long long never = 0-SOE_NEVER;
    if (twice != 63072000000LL || never != 1 || strlen(version) < 5 || strlen(stringified) < 2) {
        fprintf(stderr, "macros: twice %lld never %lld version %s\n", twice, never, version);
        return 1;
    }
    printf("macros: %zu numeric macros, one year = %lld ms, soe %s (sum %lld)\n",
           sizeof numeric / sizeof numeric[0], (long long)SOE_MAX_DURATION_MS, version, sum);
    return 0;
}
