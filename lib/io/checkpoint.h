/* Checkpoints of a network: what pcnn_net_save and pcnn_net_load offer the
 * other rooms.  The file format itself lives in checkpoint_format.h.
 *
 * The extra section is opaque bytes saved and restored with the network
 * in the same atomic file, meant for the adaptive batch scheduler's state
 * (pcnn_scheduler_save_state); it is optional, so files without it load
 * everywhere and callers that do not care pass NULL. */
#ifndef PCNN_IO_CHECKPOINT_H
#define PCNN_IO_CHECKPOINT_H

#include <stddef.h>

#include "pcnn.h"

/* pcnn_net_save with an optional extra section of extra_bytes bytes (extra
 * may be NULL when extra_bytes is 0; no section is written then).  With a
 * communicator, rank 0's extra is the one written.  func names the public
 * function in messages.  Collective with a communicator. */
pcnn_status checkpoint_save(pcnn_net *net, const char *path, const void *extra,
                            size_t extra_bytes, const char *func);

/* pcnn_net_load that also hands back the extra section: up to extra_size
 * bytes into extra (SHAPE if the file holds more: nothing changes then),
 * and its size into *extra_bytes (may be NULL; 0 when the file has none;
 * also written with SHAPE).  With a communicator every rank receives it. */
pcnn_status checkpoint_load(pcnn_net *net, const char *path, void *extra, size_t extra_size,
                            size_t *extra_bytes, const char *func);

#endif
