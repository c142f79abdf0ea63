/*
 * prog_hiredis.c - sluiced through plain hiredis, no client library (run by test_client.sh):
 * what any Redis client sees. One pipeline of SL.ALLOW, SL.THROTTLE, CL.THROTTLE, PING and
 * malformed commands is written at once, then every reply is read back in order and checked:
 * types, values, and errors that leave the connection usable.
 *
 *   prog_hiredis PORT PASSWORD
 *
 * The server must have the rule `tight` (sliding_log, limit 2, window 1h) and require
 * PASSWORD. Prints one "ok"/"not ok" line per check; exits 0 when all passed.
 */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static int checks;

static void check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check(int cond, const char *fmt, ...)
{
    checks++;
    printf("%s %d - ", cond ? "ok" : "not ok", checks);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    failures += !cond;
}

/* The reply as text, for messages: "[1 2 1 0 10]", "+PONG", "-ERR ...". */
static void render(const redisReply *r, char *out, size_t cap)
{
    size_t n = 0;
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(out, cap, "%lld", r->integer);
        return;
    case REDIS_REPLY_STATUS:
        snprintf(out, cap, "+%s", r->str);
        return;
    case REDIS_REPLY_ERROR:
        snprintf(out, cap, "-%s", r->str);
        return;
    case REDIS_REPLY_STRING:
        snprintf(out, cap, "\"%s\"", r->str);
        return;
    case REDIS_REPLY_NIL:
        snprintf(out, cap, "nil");
        return;
    case REDIS_REPLY_ARRAY:
        n += (size_t)snprintf(out, cap, "[");
        for (size_t i = 0; i < r->elements && n < cap; i++) {
            render(r->element[i], out + n, cap - n);
            n += strlen(out + n);
            if (i + 1 < r->elements && n < cap)
                n += (size_t)snprintf(out + n, cap - n, " ");
        }
        if (n < cap)
            snprintf(out + n, cap - n, "]");
        return;
    default:
        snprintf(out, cap, "?");
    }
}

/* An expected reply: exact text, or a pattern where '*' in an array stands for any integer
 * and a trailing '*' in an error for any rest. */
static int matches(const char *got, const char *want)
{
    while (*want != '\0') {
        if (*want == '*') {
            want++;
            if (*want == '\0')
                return 1; /* any rest */
            if (*got == '-')
                got++;
            if (*got < '0' || *got > '9')
                return 0;
            while (*got >= '0' && *got <= '9')
                got++;
            continue;
        }
        if (*got++ != *want++)
            return 0;
    }
    return *got == '\0';
}

struct step {
    const char *argv[10]; /* the command, NULL-terminated */
    const char *want;     /* the reply, rendered (see matches()) */
};

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: prog_hiredis PORT PASSWORD\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", atoi(argv[1]), tv);
    if (c == NULL || c->err) {
        printf("not ok - connect: %s\n", c ? c->errstr : "oom");
        return 1;
    }
    redisSetTimeout(c, tv);
    const struct step steps[] = {
        {{"PING"}, "-NOAUTH*"},
        {{"SL.ALLOW", "tight", "h1"}, "-NOAUTH*"},
        {{"AUTH", "wrong"}, "-*"},
        {{"AUTH", argv[2]}, "+OK"},
        {{"PING"}, "+PONG"},
        {{"SL.ALLOW", "tight", "h1"}, "[1 2 1 0 *]"},
        {{"SL.ALLOW", "tight", "h1"}, "[1 2 0 0 *]"},
        {{"SL.ALLOW", "tight", "h1"}, "[0 2 0 * *]"},
        {{"SL.PEEK", "tight", "h1"}, "[* 2 0 * *]"},
        {{"SL.ALLOW", "tight", "h2", "COST", "2"}, "[1 2 0 0 *]"},
        {{"SL.ALLOW", "tight", "h3", "COST", "3"},
         "-ERR cost 3 exceeds what rule 'tight' can ever admit (2 per window)"},
        {{"SL.ALLOWALL", "tight", "h4", "tight", "h1"}, "[0 2 0 * *]"},
        {{"SL.ALLOW", "tight", "h4"}, "[1 2 1 0 *]"}, /* the ALLOWALL took nothing from h4 */
        {{"SL.RESET", "tight", "h1"}, "+OK"},
        {{"SL.ALLOW", "tight", "h1"}, "[1 2 1 0 *]"},
        /* inline rules (sliding_log: exact, no window boundary to cross mid-test) */
        {{"SL.THROTTLE", "t1", "sliding_log", "2", "3600000"}, "[1 2 1 0 *]"},
        {{"SL.THROTTLE", "t1", "sliding_log", "2", "3600000"}, "[1 2 0 0 *]"},
        {{"SL.THROTTLE", "t1", "sliding_log", "2", "3600000"}, "[0 2 0 * *]"},
        {{"SL.THROTTLE", "t2", "token_bucket", "1", "60000", "BURST", "3", "COST", "3"},
         "[1 3 0 0 *]"},
        /* redis-cell's reply: [limited, limit, remaining, retry_after_s, reset_after_s] with
         * max_burst 1, 2 per 60 s: T = 30 s */
        {{"CL.THROTTLE", "c1", "1", "2", "60"}, "[0 2 1 -1 30]"},
        {{"CL.THROTTLE", "c1", "1", "2", "60"}, "[0 2 0 -1 60]"},
        {{"CL.THROTTLE", "c1", "1", "2", "60"}, "[1 2 0 30 60]"},
        {{"CL.THROTTLE", "c2", "1", "2", "60", "2"}, "[0 2 0 -1 60]"},
        /* errors, each leaving the connection usable */
        {{"SL.ALLOW", "tight"}, "-ERR wrong number of arguments for 'sl.allow' command"},
        {{"SL.ALLOW", "nope", "k"}, "-ERR unknown rule 'nope'"},
        {{"SL.ALLOW", "tight", "k", "COST", "-1"}, "-ERR*"},
        {{"SL.ALLOW", "tight", "k", "COST", "x"}, "-ERR*"},
        {{"SL.THROTTLE", "t3", "leaky_bucket", "1", "1000"}, "-ERR*"},
        {{"SL.THROTTLE", "t3", "sliding_log", "1", "0"}, "-ERR*"},
        {{"CL.THROTTLE", "c3", "1", "0", "60"}, "-ERR*"},
        {{"SL.NOSUCH"}, "-ERR*"},
        {{"PING"}, "+PONG"},
    };
    const size_t nsteps = sizeof steps / sizeof steps[0];
    for (size_t i = 0; i < nsteps; i++) {
        int n = 0;
        while (steps[i].argv[n] != NULL)
            n++;
        redisAppendCommandArgv(c, n, (const char **)steps[i].argv, NULL);
    }
    for (size_t i = 0; i < nsteps; i++) {
        redisReply *r = NULL;
        char cmd[256] = "", got[512] = "";
        for (int j = 0; steps[i].argv[j] != NULL; j++) {
            strcat(cmd, j ? " " : "");
            strncat(cmd, steps[i].argv[j], 64);
        }
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            check(0, "%s: no reply (%s)", cmd, c->errstr);
            return 1;
        }
        render(r, got, sizeof got);
        check(matches(got, steps[i].want), "%s -> %s (want %s)", cmd, got, steps[i].want);
        freeReplyObject(r);
    }
    redisFree(c);
    printf("%d/%d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
