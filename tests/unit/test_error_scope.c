/* The API scope of lib/core/error.h: a failure found anywhere names the
 * public function the host called, once; outside any public function the
 * helper's own name is kept.  Uses stand-in "public" functions built like
 * the real ones (API_ENTRY() first), so it needs nothing else of the
 * library.  Two threads check that scopes and messages are per thread. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static int failures;

static void expect_message(int line, const char *want)
{
    const char *got = pcnn_last_error();
    if (strcmp(got, want) == 0) return;
    failures++;
    fprintf(stderr, "FAIL line %d:\n  want \"%s\"\n  got  \"%s\"\n", line, want, got);
}

static void expect_status(int line, pcnn_status got, pcnn_status want)
{
    if (got == want) return;
    failures++;
    fprintf(stderr, "FAIL line %d: status %d, want %d\n", line, (int)got, (int)want);
}

/* Internal helpers, as in lib/: FAIL names the function it is written in. */
static pcnn_status plan_buffers(int bytes)
{
    return FAIL(PCNN_ERR_OUT_OF_MEMORY, "%d bytes of workspace", bytes);
}

static pcnn_status check_layer(int index)
{
    TRY(index < 0 ? plan_buffers(64) : PCNN_OK);
    return FAIL(PCNN_ERR_SHAPE, "layer %d does not fit", index);
}

/* Stand-ins for public functions. */
static pcnn_status pcnn_step(int index)
{
    API_ENTRY();
    return check_layer(index);
}

static pcnn_status pcnn_epoch(int steps, int failing)
{
    API_ENTRY();
    for (int i = 0; i < steps; i++)
        if (i == failing) TRY(pcnn_step(-1));
    return PCNN_OK;
}

/* A public function that returns early with success, then one that fails
 * after a nested public call succeeded. */
static pcnn_status pcnn_noop(void)
{
    API_ENTRY();
    return PCNN_OK;
}

static pcnn_status pcnn_save(void)
{
    API_ENTRY();
    TRY(pcnn_noop());
    return FAIL(PCNN_ERR_IO, "cannot write");
}

/* Re-stating the previous message, as the checkpoint code does for a
 * helper's failure: the argument is the message buffer itself. */
static pcnn_status pcnn_restate(void)
{
    API_ENTRY();
    (void)plan_buffers(8);
    const char *text = strchr(pcnn_last_error(), ' ') + 1;
    return error_set(PCNN_ERR_IO, "restate", "%s, again", text);
}

static pcnn_status pcnn_long_message(void)
{
    API_ENTRY();
    char word[600];
    memset(word, 'x', sizeof word - 1);
    word[sizeof word - 1] = '\0';
    return FAIL(PCNN_ERR_INVALID_ARGUMENT, "%s", word);
}

static void single_thread(void)
{
    /* No scope: the helper's name, as before. */
    expect_status(__LINE__, check_layer(3), PCNN_ERR_SHAPE);
    expect_message(__LINE__, "check_layer: layer 3 does not fit");

    /* A failure two helpers deep names the public function. */
    expect_status(__LINE__, pcnn_step(-1), PCNN_ERR_OUT_OF_MEMORY);
    expect_message(__LINE__, "pcnn_step: 64 bytes of workspace");
    expect_status(__LINE__, pcnn_step(5), PCNN_ERR_SHAPE);
    expect_message(__LINE__, "pcnn_step: layer 5 does not fit");

    /* A public function calling another: the outer one, once. */
    expect_status(__LINE__, pcnn_epoch(4, 2), PCNN_ERR_OUT_OF_MEMORY);
    expect_message(__LINE__, "pcnn_epoch: 64 bytes of workspace");

    /* The scope closes on every return path: a helper called directly
     * afterwards gets its own name again. */
    expect_status(__LINE__, pcnn_epoch(4, -1), PCNN_OK);
    expect_status(__LINE__, plan_buffers(1), PCNN_ERR_OUT_OF_MEMORY);
    expect_message(__LINE__, "plan_buffers: 1 bytes of workspace");
    expect_status(__LINE__, pcnn_save(), PCNN_ERR_IO);
    expect_message(__LINE__, "pcnn_save: cannot write");
    expect_status(__LINE__, check_layer(7), PCNN_ERR_SHAPE);
    expect_message(__LINE__, "check_layer: layer 7 does not fit");

    expect_status(__LINE__, pcnn_restate(), PCNN_ERR_IO);
    expect_message(__LINE__, "pcnn_restate: 8 bytes of workspace, again");

    /* Truncated to the buffer, the name kept. */
    expect_status(__LINE__, pcnn_long_message(), PCNN_ERR_INVALID_ARGUMENT);
    const char *msg = pcnn_last_error();
    if (strlen(msg) != 511 || strncmp(msg, "pcnn_long_message: xxx", 22) != 0) {
        failures++;
        fprintf(stderr, "FAIL long message: %zu chars, \"%.30s...\"\n", strlen(msg), msg);
    }

    error_clear();
    expect_message(__LINE__, "");
}

/* Each thread fails inside its own scope many times while the other does
 * the same (or fails outside any scope): a shared scope or message would
 * show the other thread's name. */
typedef struct worker {
    int scoped;
    int bad;
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 20000 && !w->bad; i++) {
        pcnn_status st = w->scoped ? pcnn_epoch(3, 1) : check_layer(i);
        char want[64];
        if (w->scoped) snprintf(want, sizeof want, "pcnn_epoch: 64 bytes of workspace");
        else snprintf(want, sizeof want, "check_layer: layer %d does not fit", i);
        if (st == PCNN_OK || strcmp(pcnn_last_error(), want) != 0) w->bad = 1;
    }
    return NULL;
}

static void two_threads(void)
{
    worker w[2] = {{1, 0}, {0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, run_worker, &w[i]);
    /* The main thread's own message survives the workers'. */
    (void)pcnn_save();
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    expect_message(__LINE__, "pcnn_save: cannot write");
    for (int i = 0; i < 2; i++)
        if (w[i].bad) {
            failures++;
            fprintf(stderr, "FAIL thread %d (%s) saw a foreign message\n", i,
                    w[i].scoped ? "scoped" : "unscoped");
        }
}

int main(void)
{
    single_thread();
    two_threads();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("error scope: all checks passed\n");
    return 0;
}
