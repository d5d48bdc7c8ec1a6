/* kbroker bench: monotonic microseconds, as librdkafka's rd_clock(). */
#ifndef KBROKER_RDTIME_SHIM_H
#define KBROKER_RDTIME_SHIM_H
#include "rd.h"
static inline rd_ts_t rd_clock(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ((rd_ts_t)ts.tv_sec * 1000000LL) + ((rd_ts_t)ts.tv_nsec / 1000);
}
#endif
