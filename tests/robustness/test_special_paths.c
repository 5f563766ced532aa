/* FIFOs, devices and directories given where a file is read (a checkpoint,
 * an IDX file) are refused with PCNN_ERR_IO at once: opening a FIFO for
 * reading would otherwise wait for a writer forever.  An alarm turns a
 * hang into a failure. */
#define _POSIX_C_SOURCE 200809L /* mkfifo, mkdtemp */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pcnn.h"

static int failures, checks;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void expect(bool ok, const char *what)
{
    checks++;
    if (!ok) failures++;
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what, ok ? "" : ": ", ok ? "" : pcnn_last_error());
}

/* The call failed with IO, at once, and its message names the path. */
static void refused(pcnn_status st, double t0, const char *path, const char *what)
{
    expect(st == PCNN_ERR_IO && now() - t0 < 2.0 && strstr(pcnn_last_error(), path), what);
}

int main(void)
{
    alarm(30);
    char dir[] = "/tmp/pcnn_special_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char fifo[64], file[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(file, sizeof file, "%s/net.ckpt", dir);
    if (mkfifo(fifo, 0600) != 0) return 1;

    pcnn_net *net;
    pcnn_layer *l;
    if (pcnn_net_create(&net) || pcnn_net_input(net, 1, 4, 4, &l) || pcnn_dense(net, l, 3, 1, &l) ||
        pcnn_net_set_loss(net, l, PCNN_LOSS_SOFTMAX_CROSS_ENTROPY) || pcnn_net_finalize(net, 2) ||
        pcnn_net_save(net, file))
        return 1;
    expect(pcnn_net_load(net, file) == PCNN_OK, "a regular checkpoint file still loads");

    const char *const specials[3] = {fifo, dir, "/dev/null"};
    const char *const names[3] = {"a FIFO", "a directory", "a character device"};
    char what[128], extra[8];
    size_t extra_bytes;
    for (int k = 0; k < 3; k++) {
        double t0 = now();
        snprintf(what, sizeof what, "pcnn_net_load of %s: IO at once", names[k]);
        refused(pcnn_net_load(net, specials[k]), t0, specials[k], what);
        t0 = now();
        snprintf(what, sizeof what, "pcnn_net_load_extra of %s: IO at once", names[k]);
        refused(pcnn_net_load_extra(net, specials[k], extra, sizeof extra, &extra_bytes), t0,
                specials[k], what);
        pcnn_dataset *data = NULL;
        t0 = now();
        snprintf(what, sizeof what, "pcnn_dataset_load_idx of %s: IO at once", names[k]);
        refused(pcnn_dataset_load_idx(specials[k], specials[k], 0.0f, 1.0f, &data), t0,
                specials[k], what);
        expect(data == NULL, "no dataset is returned");
    }
    pcnn_net_destroy(&net);
    unlink(fifo);
    unlink(file);
    rmdir(dir);
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
