// soe.h compiles as C++ (g++ -Wall -Wextra -Werror) and its types are usable there.
#include "soe.h"

#include <cstdio>
#include <cstring>

int main() {
    soe_config *config = nullptr;
    if (soe_config_new(SOE_ROLE_SERVER, &config) != SOE_OK ||
        soe_config_set(config, SOE_OPT_IDLE_TIMEOUT_MS, SOE_NEVER) != SOE_OK) {
        return 1;
    }
    soe_endpoint *ep = nullptr;
    soe_status status = soe_endpoint_new(config, 0, &ep);
    soe_config_free(config);
    if (status != SOE_OK || ep == nullptr) {
        std::fprintf(stderr, "%s: %s\n", soe_status_name(status), soe_last_error());
        return 1;
    }
    soe_event event;
    unsigned char buf[16];
    status = soe_endpoint_poll_event(ep, &event, buf, sizeof buf);
    soe_endpoint_free(ep);
    if (status != SOE_DONE) {
        return 1;
    }
    std::printf("header_check: soe %s from C++\n", soe_version());
    return 0;
}
