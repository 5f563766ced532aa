"""The enums of include/pcnn.h, value for value (the tests compare them with
the header).  Wherever the binding takes one, it also accepts the member's
name as a string, case-insensitive: "adam", "learning_rate", "allreduce"."""
import enum

from .errors import InvalidArgumentError


class Status(enum.IntEnum):
    OK = 0
    ERR_INVALID_ARGUMENT = 1
    ERR_INVALID_STATE = 2
    ERR_SHAPE = 3
    ERR_OUT_OF_MEMORY = 4
    ERR_MPI = 5
    ERR_REMOTE = 6
    ERR_TIMEOUT = 7
    ERR_UNSUPPORTED = 8
    ERR_NUMERIC = 9
    ERR_IO = 10
    ERR_CORRUPT = 11
    ERR_MISMATCH = 12
    ERR_INTERNAL = 13


class Optimizer(enum.IntEnum):
    SGD = 0
    MOMENTUM = 1
    ADAM = 2


class Loss(enum.IntEnum):
    SOFTMAX_CROSS_ENTROPY = 0
    MSE = 1
    L1 = 2
    BCE_WITH_LOGITS = 3  # section 9.5: targets are probabilities of the output's shape


class Init(enum.IntEnum):
    HE_NORMAL = 0
    HE_UNIFORM = 1
    GLOROT_NORMAL = 2
    GLOROT_UNIFORM = 3


class Option(enum.IntEnum):
    LEARNING_RATE = 0
    MOMENTUM = 1
    WEIGHT_DECAY = 2
    ADAM_BETA1 = 3
    ADAM_BETA2 = 4
    ADAM_EPSILON = 5
    SEED = 6
    WARMUP_STEPS = 7
    DECAY_EVERY_STEPS = 8
    DECAY_FACTOR = 9
    THREADS = 10
    KEEP_IM2COL = 11
    CHECK_NUMERICS = 12
    STEP = 13
    EFFECTIVE_LEARNING_RATE = 14
    BUCKET_BYTES = 15
    OVERLAP = 16
    ENGINE = 17
    ACTIVE_ENGINE = 18
    COMM_CORE = 19
    TIMEOUT_MS = 20
    TRACE_EVENTS = 21
    CONV_ALGORITHM = 22
    SYNC_BATCHNORM = 23
    HALO_OVERLAP = 24
    HALO_SCHEDULE = 25
    BN_SCOPE = 26
    SPATIAL_FALLBACK = 27
    PLAN_MAX_SPATIAL = 28
    PLAN_SPATIAL_DIMS = 29
    PLAN_MIXED = 30
    MEMORY_LIMIT_MIB = 31
    PRECISION = 32


class Precision(enum.IntEnum):
    """Values of Option.PRECISION (pcnn_precision)."""
    FP32 = 0
    BF16 = 1


class Exchange(enum.IntEnum):
    ALLREDUCE = 0
    ALLTOALL_ALLGATHER = 1
    FC_GRADIENT = 2


class Time(enum.IntEnum):
    FORWARD = 0
    BACKWARD = 1
    UPDATE = 2
    COMM = 3
    EXPOSED = 4
    STEP = 5
    HALO = 6
    HALO_EXPOSED = 7
    SHUFFLE = 8


class MemoryPart(enum.IntEnum):
    PARAMETERS = 0
    OPTIMIZER = 1
    ACTIVATIONS = 2
    WORKSPACE = 3
    COMMUNICATION = 4


class LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1


class SchedLrRule(enum.IntEnum):
    LINEAR = 0
    ROOT = 1


class SchedOption(enum.IntEnum):
    GROWTH_FACTOR = 0
    LR_RULE = 1
    INTERVAL_EPOCHS = 2
    THETA_THRESHOLD = 3
    DECAY_FACTOR = 4
    PLATEAU_EPOCHS = 5
    PLATEAU_THRESHOLD = 6
    WARMUP_EPOCHS = 7
    MIN_LOCAL_SAMPLES = 8
    INITIAL_LOSS = 9
    EPOCH = 10
    BATCH = 11
    LEARNING_RATE = 12
    INTERVAL = 13
    THETA = 14
    DECAYS = 15
    ACTIVE_RANKS = 16
    EVENTS = 17


class SchedEvent(enum.IntFlag):
    """Bits of SchedOption.EVENTS (the PCNN_SCHED_EVENT_* macros)."""
    INTERVAL_FOUND = 1
    BATCH_GREW = 2
    LR_DECAYED = 4


class Collective(enum.IntEnum):
    SENDRECV = 0
    ALLREDUCE = 1
    ALLTOALL = 2
    ALLGATHER = 3


class PerfParam(enum.IntEnum):
    ALPHA_S = 0
    BETA_S_PER_BYTE = 1
    GAMMA_S_PER_BYTE = 2
    LINK_GBITS = 3
    STRATEGY = 4
    ENGINE = 5
    NONBLOCKING_PROGRESS = 6
    COMPUTE_SOURCE = 7
    MEMORY_CONTENTION = 8
    RANK_PACE = 9


class PerfFlag(enum.IntEnum):
    """What a performance model's figures rest on (pcnn.h 9.3,
    PerfModel.confidence): bits OR-ed together."""
    FLAG_LINK_DEFAULTS = 1
    FLAG_LINK_FEW_POINTS = 2
    FLAG_LINK_SHORT_RANGE = 4
    FLAG_LINK_NOISY = 8
    FLAG_COMPUTE_NOISY = 16
    FLAG_COMPUTE_ESTIMATED = 32


class UpsampleMode(enum.IntEnum):
    """How Net.upsample2d / upsample3d fill the new points (pcnn.h 9.5)."""
    NEAREST = 0
    LINEAR = 1  # bilinear in 2D, trilinear in 3D (align_corners=False)


# Header prefix of each enum's members, for the consistency test.
class Dtype(enum.IntEnum):
    """Element type of volume files (pcnn_dtype, pcnn.volumes)."""
    F32 = 0
    F64 = 1


C_PREFIX = {
    "pcnn_status": (Status, "PCNN_"),
    "pcnn_optimizer": (Optimizer, "PCNN_OPTIMIZER_"),
    "pcnn_loss": (Loss, "PCNN_LOSS_"),
    "pcnn_init": (Init, "PCNN_INIT_"),
    "pcnn_option": (Option, "PCNN_OPT_"),
    "pcnn_exchange": (Exchange, "PCNN_EXCHANGE_"),
    "pcnn_time": (Time, "PCNN_TIME_"),
    "pcnn_memory_part": (MemoryPart, "PCNN_MEMORY_"),
    "pcnn_log_level": (LogLevel, "PCNN_LOG_"),
    "pcnn_sched_lr_rule": (SchedLrRule, "PCNN_SCHED_LR_"),
    "pcnn_sched_option": (SchedOption, "PCNN_SCHED_"),
    "pcnn_collective": (Collective, "PCNN_COLL_"),
    "pcnn_perf_param": (PerfParam, "PCNN_PERF_"),
    "pcnn_perf_flag": (PerfFlag, "PCNN_PERF_"),
    "pcnn_dtype": (Dtype, "PCNN_DTYPE_"),
    "pcnn_upsample_mode": (UpsampleMode, "PCNN_UPSAMPLE_"),
    "pcnn_precision": (Precision, "PCNN_PRECISION_"),
}


def coerce(value, cls, what):
    """An enum member from a member, its int value or its name."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.strip().upper().replace("-", "_")]
        except KeyError:
            names = ", ".join(m.name.lower() for m in cls)
            raise InvalidArgumentError("%s: unknown %s %r (one of: %s)"
                             % (what, cls.__name__.lower(), value, names)) from None
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            # Possibly newer than this binding: let the library judge it.
            return value
    raise TypeError("%s: expected a pcnn.%s, its name or its value, got %r"
                    % (what, cls.__name__, value))
