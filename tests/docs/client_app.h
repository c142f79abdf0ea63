/*
 * client_app.h - what the C fragments of docs/client.md take from the program around them:
 * the application's own functions (serve, reply_429, give_up, sleep_ms, ask_model), its
 * values (user_id, key, seed). The fragments run against the document's sluiced.
 */
#include <stdint.h>
#include <time.h>

static const char *user_id = "u42";
static const char *key = "u43";
static const uint64_t seed = 20241;

static void sleep_ms(int64_t ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

static void serve(void)
{
    puts("served");
}

static void reply_429(int64_t retry_after_ms)
{
    printf("429, retry in %lld ms\n", (long long)retry_after_ms);
}

static void give_up(void)
{
    puts("gave up");
    exit(1);
}

/* A language model's answer to prompt, in at most max_tokens: returns the tokens it took. */
static int64_t ask_model(const char *prompt, int64_t max_tokens)
{
    (void)prompt;
    return max_tokens < 120 ? max_tokens : 120;
}
