/* kbroker bench: stand-in for librdkafka's internal rd.h, with only what
 * examples/rdkafka_performance.c uses from it. */
#ifndef KBROKER_RD_SHIM_H
#define KBROKER_RD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <unistd.h>
#include <time.h>
#include <sys/time.h>

typedef int64_t rd_ts_t;
#define RD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define rd_snprintf snprintf
#endif
