/*
 * The layout of soe.h's structs as the C compiler lays them out: one line per struct (its size)
 * and per field (its offset). tests/Layout.cs prints the same lines from the C# declarations
 * (Marshal.SizeOf, Marshal.OffsetOf); `cargo xtask csharp` requires the two outputs to match.
 */
#include <stddef.h>
#include <stdio.h>

#include "soe.h"

#define SIZE(t) printf("%s %zu\n", #t, sizeof(t))
#define FIELD(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void) {
    SIZE(soe_addr);
    FIELD(soe_addr, family);
    FIELD(soe_addr, port);
    FIELD(soe_addr, ip);
    FIELD(soe_addr, scope_id);
    SIZE(soe_event);
    FIELD(soe_event, kind);
    FIELD(soe_event, session);
    FIELD(soe_event, channel);
    FIELD(soe_event, delivery);
    FIELD(soe_event, len);
    FIELD(soe_event, reason);
    FIELD(soe_event, by_peer);
    FIELD(soe_event, user);
    SIZE(soe_stats);
    FIELD(soe_stats, rtt_us);
    FIELD(soe_stats, unreliable_received);
    return 0;
}
