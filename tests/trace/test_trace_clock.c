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
    const clock_measure m = trace_clock_estimate(pings, 4);
    const double offset = m.offset, error = m.error;
    expect(fabs(error - 1.5e-6) < 1e-12, "the error bound is half the shortest round trip");
    expect(fabs(offset - (skew + 0.5e-6)) < 1e-9,
           "the offset comes from the ping with the shortest round trip");
    expect(fabs(offset - skew) <= error, "the true offset lies within the error bound");
    expect(fabs(m.at - 12.0000015) < 1e-9, "measured at the middle of that ping");

    /* A clock running 20 ppm slow: 5 s behind at 100 s, 5.0002 s at 110 s.
     * Between and after the two measurements, times follow the drift. */
    trace_clock drifting = {0};
    trace_clock_add(&drifting, (clock_measure){100.0, 5.0, 1e-6});
    expect(drifting.measured == 1 && trace_clock_to_rank0(&drifting, 110.0) == 115.0,
           "one measurement: a constant offset");
    trace_clock_add(&drifting, (clock_measure){110.0, 5.0002, 3e-6});
    expect(drifting.measured == 2 && fabs(trace_clock_to_rank0(&drifting, 105.0) - 110.0001) < 1e-9 &&
               fabs(trace_clock_to_rank0(&drifting, 120.0) - 125.0004) < 1e-9,
           "two measurements: the offset follows the drift");
    expect(trace_clock_error(&drifting) == 3e-6, "the error bound is the larger one");
    trace_clock noisy = {0};
    trace_clock_add(&noisy, (clock_measure){100.0, 5.0, 1e-6});
    trace_clock_add(&noisy, (clock_measure){110.0, 5.002, 8e-3}); /* a busy machine's ping */
    expect(trace_clock_to_rank0(&noisy, 120.0) == 125.0 && trace_clock_error(&noisy) == 1e-6,
           "a change within the errors is noise: the more precise offset alone");

    /* A rank (world rank 3) whose clock is 5 s behind rank 0's: rank 0
     * measured at its 105 s; this rank's step ran from its 100.5 s to
     * 100.75 s, i.e. 0.5 s after the measurement on rank 0's clock. */
    trace_event events[2] = {0};
    profile p = {0};
    p.events = events;
    p.capacity = 2;
    p.clock = (trace_clock){.pid = 3, .origin = 105.0};
    trace_clock_add(&p.clock, (clock_measure){100.0, skew, error});
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
