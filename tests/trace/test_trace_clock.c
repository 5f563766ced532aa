/* The common clock of traces without MPI: the offset estimate from pings
 * with uneven delays and a skewed clock, and the timestamps a rank's part
 * of a trace then carries (rank 0's clock, time 0 at the measurement). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "profile/profile.h"

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) failures++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
}

int main(void)
{
    /* Rank 0's clock reads this rank's + 5 s.  Ping k leaves at 10 + k,
     * takes out[k] there and back[k] back; the third has the shortest
     * round trip (3 us), split 2 us out, 1 us back. */
    const double skew = 5.0, out[4] = {40e-6, 9e-6, 2e-6, 1e-6}, back[4] = {5e-6, 30e-6, 1e-6, 9e-6};
    clock_ping pings[4];
    for (int k = 0; k < 4; k++) {
        const double sent = 10.0 + k;
        pings[k] = (clock_ping){sent, sent + out[k] + skew, sent + out[k] + back[k]};
    }
    double offset, error;
    trace_clock_estimate(pings, 4, &offset, &error);
    expect(fabs(error - 1.5e-6) < 1e-12, "the error bound is half the shortest round trip");
    expect(fabs(offset - (skew + 0.5e-6)) < 1e-9,
           "the offset comes from the ping with the shortest round trip");
    expect(fabs(offset - skew) <= error, "the true offset lies within the error bound");

    /* A rank (world rank 3) whose clock is 5 s behind rank 0's: rank 0
     * measured at its 105 s; this rank's step ran from its 100.5 s to
     * 100.75 s, i.e. 0.5 s after the measurement on rank 0's clock. */
    trace_event events[2] = {0};
    profile p = {0};
    p.events = events;
    p.capacity = 2;
    p.clock = (trace_clock){.pid = 3, .measured = true, .offset = skew, .error = error,
                            .origin = 105.0};
    trace_step(&p, 7, 100.5, 100.75);
    char buf[4096];
    const size_t len = trace_format(&p, NULL, buf, sizeof buf);
    expect(len == strlen(buf) && len < sizeof buf, "trace_format returns its length");
    expect(trace_format(&p, NULL, NULL, 0) == len, "a measuring call returns the same length");
    expect(strstr(buf, "\"name\":\"step 7\"") && strstr(buf, "\"args\":{\"step\":7}"),
           "the step marker names its step");
    expect(strstr(buf, "\"ts\":500000.000,\"dur\":250000.000") != NULL,
           "the step's timestamp is on rank 0's clock, from the measurement");
    expect(strstr(buf, "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":3") &&
               strstr(buf, "\"args\":{\"name\":\"rank 3\"}"),
           "the process is the world rank, named");
    expect(strstr(buf, "\"offset_us\":5000000.000") != NULL,
           "the clock sync event reports the offset");
    char small[16];
    expect(trace_format(&p, NULL, small, sizeof small) == len && strlen(small) == sizeof small - 1,
           "a short buffer is filled and terminated, the full length returned");
    return failures ? 1 : 0;
}
