/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * A tiny unit-test harness (header only).
 *
 *   static void test_something(void) { CHECK_EQ(1 + 1, 2); }
 *   UNIT_MAIN(UNIT_TEST(test_something), ...)
 *
 * Table-driven suites build their own unit_test_t array with
 * UNIT_TEST_ARG(name, fn, arg) entries and call unit_run() from main.
 *
 * Every CHECK that fails prints "file:line: <expression> failed" and the
 * values involved, marks the running test failed and carries on; the
 * REQUIRE variants also return from the test (use them before
 * dereferencing something that may be NULL).  A test passes when none of
 * its checks failed.  The binary prints one "FAIL name" line per failed test
 * and, last, the machine-readable line
 *
 *   unit-result <binary> <tests passed> <tests failed>
 *
 * which test/unit/run-tests.sh adds up.  Exit status: 0 iff all passed.
 * Run one binary with a substring as argument to run only the tests whose
 * name contains it, and with -v to print every test name.
 */
#ifndef USNIC_UNIT_H
#define USNIC_UNIT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit_test_t {
    const char *name;
    void (*fn)(void);
    /* or, for table-driven suites: fn_arg(arg) */
    void (*fn_arg)(const void *arg);
    const void *arg;
} unit_test_t;

typedef struct unit_state_t {
    const char *current;   /* running test */
    bool current_failed;
    unsigned long checks_passed;
    unsigned long checks_failed;
} unit_state_t;

static unit_state_t unit_state;

static inline void unit_fail_header(const char *file, int line)
{
    if (!unit_state.current_failed) {
        fprintf(stderr, "---- %s\n", unit_state.current ? unit_state.current : "(no test)");
    }
    unit_state.current_failed = true;
    ++unit_state.checks_failed;
    fprintf(stderr, "%s:%d: ", file, line);
}

/* Returns its condition, so REQUIRE can act on it */
static inline bool unit_check(bool ok, const char *file, int line, const char *expr)
{
    if (ok) {
        ++unit_state.checks_passed;
        return true;
    }
    unit_fail_header(file, line);
    fprintf(stderr, "CHECK(%s) failed\n", expr);
    return false;
}

static inline bool unit_check_cmp_i(bool ok, const char *file, int line, const char *op, const char *ea,
                                    const char *eb, int64_t a, int64_t b)
{
    if (ok) {
        ++unit_state.checks_passed;
        return true;
    }
    unit_fail_header(file, line);
    fprintf(stderr, "CHECK(%s %s %s) failed: %s = %" PRId64 " (0x%" PRIx64 "), %s = %" PRId64 " (0x%" PRIx64 ")\n",
            ea, op, eb, ea, a, (uint64_t) a, eb, b, (uint64_t) b);
    return false;
}

static inline bool unit_check_cmp_u(bool ok, const char *file, int line, const char *op, const char *ea,
                                    const char *eb, uint64_t a, uint64_t b)
{
    if (ok) {
        ++unit_state.checks_passed;
        return true;
    }
    unit_fail_header(file, line);
    fprintf(stderr, "CHECK(%s %s %s) failed: %s = %" PRIu64 " (0x%" PRIx64 "), %s = %" PRIu64 " (0x%" PRIx64 ")\n",
            ea, op, eb, ea, a, a, eb, b, b);
    return false;
}

static inline bool unit_check_str(const char *file, int line, const char *ea, const char *eb, const char *a,
                                  const char *b)
{
    bool ok = (a == b) || (NULL != a && NULL != b && 0 == strcmp(a, b));
    if (ok) {
        ++unit_state.checks_passed;
        return true;
    }
    unit_fail_header(file, line);
    fprintf(stderr, "CHECK_STR(%s, %s) failed: \"%s\" != \"%s\"\n", ea, eb, a ? a : "(null)", b ? b : "(null)");
    return false;
}

static inline bool unit_check_mem(const char *file, int line, const char *ea, const char *eb, const void *a,
                                  const void *b, size_t len)
{
    const uint8_t *pa = (const uint8_t *) a, *pb = (const uint8_t *) b;
    size_t i = 0;
    if (len > 0 && (NULL == pa || NULL == pb)) {
        unit_fail_header(file, line);
        fprintf(stderr, "CHECK_MEM(%s, %s, %zu) failed: NULL buffer\n", ea, eb, len);
        return false;
    }
    while (i < len && pa[i] == pb[i]) {
        ++i;
    }
    if (i == len) {
        ++unit_state.checks_passed;
        return true;
    }
    unit_fail_header(file, line);
    fprintf(stderr, "CHECK_MEM(%s, %s, %zu) failed: first difference at byte %zu: 0x%02x != 0x%02x\n", ea, eb, len,
            i, pa[i], pb[i]);
    return false;
}

#define CHECK(cond) unit_check(!!(cond), __FILE__, __LINE__, #cond)
/* Each operand is evaluated exactly once (GNU statement expressions) */
#define CHECK_CMP_I(a, op, b) \
    ({ \
        int64_t unit_a_ = (int64_t) (a), unit_b_ = (int64_t) (b); \
        unit_check_cmp_i(unit_a_ op unit_b_, __FILE__, __LINE__, #op, #a, #b, unit_a_, unit_b_); \
    })
#define CHECK_CMP_U(a, op, b) \
    ({ \
        uint64_t unit_a_ = (uint64_t) (a), unit_b_ = (uint64_t) (b); \
        unit_check_cmp_u(unit_a_ op unit_b_, __FILE__, __LINE__, #op, #a, #b, unit_a_, unit_b_); \
    })
/* Signed comparisons (values converted to int64_t) */
#define CHECK_EQ(a, b) CHECK_CMP_I(a, ==, b)
#define CHECK_NE(a, b) CHECK_CMP_I(a, !=, b)
#define CHECK_LT(a, b) CHECK_CMP_I(a, <, b)
#define CHECK_LE(a, b) CHECK_CMP_I(a, <=, b)
#define CHECK_GT(a, b) CHECK_CMP_I(a, >, b)
#define CHECK_GE(a, b) CHECK_CMP_I(a, >=, b)
/* Unsigned comparisons (values converted to uint64_t) */
#define CHECK_EQ_U(a, b) CHECK_CMP_U(a, ==, b)
#define CHECK_LE_U(a, b) CHECK_CMP_U(a, <=, b)
#define CHECK_PTR_EQ(a, b) CHECK_CMP_U((uintptr_t) (a), ==, (uintptr_t) (b))
#define CHECK_PTR_NE(a, b) CHECK_CMP_U((uintptr_t) (a), !=, (uintptr_t) (b))
#define CHECK_STR(a, b) unit_check_str(__FILE__, __LINE__, #a, #b, (a), (b))
#define CHECK_MEM(a, b, len) unit_check_mem(__FILE__, __LINE__, #a, #b, (a), (b), (len))

/* Stop the running test when the check fails */
#define REQUIRE(cond) do { if (!CHECK(cond)) { return; } } while (0)
#define REQUIRE_EQ(a, b) do { if (!CHECK_EQ(a, b)) { return; } } while (0)

/* Report a failure with a formatted message */
#define FAILF(...) do { unit_fail_header(__FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } while (0)

#define UNIT_TEST(fn) { #fn, fn, NULL, NULL }
#define UNIT_TEST_ARG(name, fn, arg) { (name), NULL, (fn), (arg) }

static inline int unit_run(const char *argv0, const unit_test_t *tests, size_t n, int argc, char **argv)
{
    const char *filter = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "-v")) {
            verbose = true;
        } else {
            filter = argv[i];
        }
    }
    const char *prog = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
    /* stderr carries the failure details: keep it ordered with stdout */
    setvbuf(stdout, NULL, _IONBF, 0);
    unsigned passed = 0, failed = 0;
    for (size_t i = 0; i < n; ++i) {
        if (NULL != filter && NULL == strstr(tests[i].name, filter)) {
            continue;
        }
        unit_state.current = tests[i].name;
        unit_state.current_failed = false;
        if (NULL != tests[i].fn) {
            tests[i].fn();
        } else {
            tests[i].fn_arg(tests[i].arg);
        }
        if (unit_state.current_failed) {
            ++failed;
            printf("FAIL %s: %s\n", prog, tests[i].name);
        } else {
            ++passed;
            if (verbose) {
                printf("ok   %s: %s\n", prog, tests[i].name);
            }
        }
    }
    printf("unit-result %s %u %u\n", prog, passed, failed);
    return 0 == failed ? 0 : 1;
}

#define UNIT_MAIN(...) \
    int main(int argc, char **argv) \
    { \
        static const unit_test_t unit_tests[] = {__VA_ARGS__}; \
        return unit_run(argv[0], unit_tests, sizeof(unit_tests) / sizeof(unit_tests[0]), argc, argv); \
    }

#endif /* USNIC_UNIT_H */
