/* The sharded mode of a dataset (pcnn_dataset_set_sharded): a flag the
 * collective passes (graph/train_sharded.c) read; the data is untouched. */
#include "../core/error.h"
#include "dataset.h"

PCNN_API pcnn_status pcnn_dataset_set_sharded(pcnn_dataset *data, int sharded)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    if (sharded != 0 && sharded != 1)
        return error_set(PCNN_ERR_INVALID_ARGUMENT, __func__,
                         "sharded must be 0 (every rank the same data) or 1 (each rank its "
                         "own shard), got %d", sharded);
    data->sharded = sharded;
    return PCNN_OK;
}

PCNN_API pcnn_status pcnn_dataset_get_sharded(const pcnn_dataset *data, int *sharded)
{
    API_ENTRY();
    REQUIRE_PTR(data);
    REQUIRE_PTR(sharded);
    *sharded = data->sharded;
    return PCNN_OK;
}
