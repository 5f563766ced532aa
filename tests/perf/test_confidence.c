/* The model's confidence flags (lib/perf/confidence.c): computed from what
 * its calibrations recorded, never from a prediction.  A fresh model is
 * flagged LINK_DEFAULTS (on more than one rank) and COMPUTE_ESTIMATED; a
 * link set by hand is not a default; a calibration's curves of too few
 * points, or only small sizes, or repetitions that disagreed, and compute
 * timings that disagreed, each raise their flag and its explanation; a
 * quiet, complete calibration raises none; the flags survive save and
 * load. */
#define PCNN_EXPERIMENTAL
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/expect.h"
#include "pcnn.h"
#include "perf/perf.h"

#define CK(call) EXPECT((call) == PCNN_OK, "%s: %s", #call, pcnn_last_error())

static int flags_of(const pcnn_perfmodel *m, int ranks, char *buf, size_t size)
{
    int f = -1;
    CK(pcnn_perfmodel_confidence(m, ranks, &f, buf, size, NULL));
    return f;
}

/* A calibration on 2 ranks of `points` sizes from 8 B, each 16x the last,
 * its repetitions `spread` apart. */
static void calibrated_link(pcnn_perfmodel *m, int points, double spread)
{
    perf_link *k = &m->link;
    k->ranks = 2;
    for (int c = 0; c < PERF_COLLECTIVES; c++) {
        perf_curve *cv = &k->curve[c];
        cv->count = points;
        double b = 8;
        for (int i = 0; i < points; i++, b *= 16) {
            cv->bytes[i] = b;
            cv->seconds[i] = 5e-6 + 1e-9 * b;
        }
        k->spread[c] = spread;
    }
}

int main(void)
{
    pcnn_perfmodel *m;
    CK(pcnn_perfmodel_create(&m));
    char buf[2048];
    const int link_flags = PCNN_PERF_FLAG_LINK_DEFAULTS | PCNN_PERF_FLAG_LINK_FEW_POINTS |
                           PCNN_PERF_FLAG_LINK_SHORT_RANGE | PCNN_PERF_FLAG_LINK_NOISY;

    int f = flags_of(m, 2, buf, sizeof buf);
    EXPECT(f == (PCNN_PERF_FLAG_LINK_DEFAULTS | PCNN_PERF_FLAG_COMPUTE_ESTIMATED),
           "fresh model on 2 ranks: flags %d", f);
    EXPECT(strstr(buf, "LINK_DEFAULTS") && strstr(buf, "calibrate_comm") &&
               strstr(buf, "COMPUTE_ESTIMATED"),
           "fresh model's explanation: %s", buf);
    f = flags_of(m, 1, buf, sizeof buf);
    EXPECT(f == PCNN_PERF_FLAG_COMPUTE_ESTIMATED && !strstr(buf, "LINK_"),
           "one rank: no link flag (%d: %s)", f, buf);
    EXPECT((flags_of(m, 0, NULL, 0) & link_flags) == PCNN_PERF_FLAG_LINK_DEFAULTS,
           "ranks 0: every flag");

    /* A link the user named is not the defaults. */
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 25.0));
    EXPECT((flags_of(m, 4, NULL, 0) & link_flags) == 0, "link set by hand: no link flag");
    CK(pcnn_perfmodel_set_param(m, PCNN_PERF_LINK_GBITS, 0.0));

    /* A short sweep: 2 sizes up to 128 B. */
    calibrated_link(m, 2, 0.1);
    f = flags_of(m, 2, buf, sizeof buf);
    EXPECT((f & link_flags) == (PCNN_PERF_FLAG_LINK_FEW_POINTS | PCNN_PERF_FLAG_LINK_SHORT_RANGE),
           "short sweep: flags %d", f);
    EXPECT(strstr(buf, "LINK_FEW_POINTS, LINK_SHORT_RANGE") && strstr(buf, "2 points up to 128 B"),
           "short sweep's explanation: %s", buf);

    /* A full sweep (8 B .. 2 GiB) on a loaded machine. */
    calibrated_link(m, 8, 0.9);
    f = flags_of(m, 2, buf, sizeof buf);
    EXPECT((f & link_flags) == PCNN_PERF_FLAG_LINK_NOISY && strstr(buf, "90 %"),
           "noisy sweep: flags %d (%s)", f, buf);

    /* A quiet, complete calibration of both: no flag at all. */
    calibrated_link(m, 8, 0.1);
    m->compute.num_layers = 3;
    m->compute.spread = 0.05;
    f = flags_of(m, 2, buf, sizeof buf);
    EXPECT(f == 0 && strstr(buf, "no flag"), "quiet calibration: flags %d (%s)", f, buf);
    m->compute.spread = 0.8;
    EXPECT(flags_of(m, 1, buf, sizeof buf) == PCNN_PERF_FLAG_COMPUTE_NOISY &&
               strstr(buf, "COMPUTE_NOISY"),
           "noisy compute timings: %s", buf);

    /* The report carries the same section. */
    m->compute.num_layers = 0;
    calibrated_link(m, 8, 0.9);
    size_t need = 0;
    CK(pcnn_perfmodel_report(m, NULL, 0, &need));
    char report[16384];
    CK(pcnn_perfmodel_report(m, report, sizeof report, NULL));
    EXPECT(need < sizeof report && strstr(report, "LINK_NOISY"), "report: %s", report);

    /* The spread survives the file (format 6). */
    char path[64];
    snprintf(path, sizeof path, "confidence_%d.model", (int)getpid());
    CK(pcnn_perfmodel_save(m, path));
    pcnn_perfmodel *back = NULL;
    CK(pcnn_perfmodel_load(path, &back));
    if (back) {
        EXPECT(flags_of(back, 2, NULL, 0) == flags_of(m, 2, NULL, 0), "flags after load: %d vs %d",
               flags_of(back, 2, NULL, 0), flags_of(m, 2, NULL, 0));
        pcnn_perfmodel_destroy(&back);
    }
    remove(path);

    /* Bad calls. */
    EXPECT(pcnn_perfmodel_confidence(NULL, 1, &f, NULL, 0, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "NULL model");
    EXPECT(pcnn_perfmodel_confidence(m, -1, &f, NULL, 0, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "ranks -1");
    EXPECT(pcnn_perfmodel_confidence(m, 1, &f, NULL, 8, NULL) == PCNN_ERR_INVALID_ARGUMENT,
           "NULL buf, size 8");
    pcnn_perfmodel_destroy(&m);
    if (failures) printf("%d failures\n", failures);
    else printf("confidence: defaults, short, noisy and quiet calibrations flagged as they are\n");
    return failures != 0;
}
