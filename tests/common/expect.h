/* The assertion of the single-process tests: count the failure and say
 * where, then go on, so that one run reports every broken check. */
#ifndef PCNN_TESTS_EXPECT_H
#define PCNN_TESTS_EXPECT_H

#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                               \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
        }                                                                             \
    } while (0)

#endif
