/*
 * test_events.c - events are counted every time and logged at most once per interval: a
 * suppressed line is counted and the next line written says how many were; /metrics shows each
 * event's counter once, with its help. Time is a clock the test moves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/events.h"
#include "engine/log.h"

static int64_t fake_now_ns;

static int64_t fake_clock(void)
{
    return fake_now_ns;
}

/* Runs fn with stderr captured into out (cap bytes, NUL-terminated). */
static void captured(void (*fn)(void), char *out, size_t cap)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

static size_t lines_of(const char *text)
{
    size_t n = 0;
    for (; *text != '\0'; text++)
        n += *text == '\n';
    return n;
}

static void burst(void)
{
    for (int i = 0; i < 1000; i++)
        event_note(EV_CROSS_PROTOCOL, "client %d misbehaved", i);
}

static void later(void)
{
    event_note(EV_CROSS_PROTOCOL, "client %d misbehaved", 1000);
}

static void test_suppressed_then_counted(void **unused)
{
    (void)unused;
    char text[8192];
    event_set_clock(fake_clock);
    fake_now_ns = 5 * EVENT_LOG_INTERVAL_NS;
    uint64_t before = event_total(EV_CROSS_PROTOCOL);

    captured(burst, text, sizeof text);
    assert_int_equal(lines_of(text), 1);
    assert_non_null(strstr(text, "WARN client 0 misbehaved\n"));
    assert_int_equal(event_total(EV_CROSS_PROTOCOL) - before, 1000);

    /* within the interval: still nothing written */
    fake_now_ns += EVENT_LOG_INTERVAL_NS - 1;
    captured(later, text, sizeof text);
    assert_string_equal(text, "");

    /* past it: one line, saying how many were left out (999 of the burst, and the one above) */
    fake_now_ns += 1;
    captured(later, text, sizeof text);
    assert_int_equal(lines_of(text), 1);
    assert_non_null(strstr(text, "client 1000 misbehaved (and 1000 more like it in the last"));
    assert_int_equal(event_total(EV_CROSS_PROTOCOL) - before, 1002);
    event_set_clock(NULL);
}

static void test_rendered_once(void **unused)
{
    (void)unused;
    buf_t b = {0};
    events_render(&b);
    buf_add(&b, "", 1);
    assert_false(b.failed);
    char want[128];
    snprintf(want, sizeof want, "sluice_cross_protocol_total %llu\n",
             (unsigned long long)event_total(EV_CROSS_PROTOCOL));
    assert_non_null(strstr(b.data, want));
    const char *help = strstr(b.data, "# HELP sluice_cross_protocol_total ");
    assert_non_null(help);
    assert_null(strstr(help + 1, "# HELP sluice_cross_protocol_total "));
    assert_non_null(strstr(b.data, "# TYPE sluice_cross_protocol_total counter\n"));
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suppressed_then_counted),
        cmocka_unit_test(test_rendered_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
