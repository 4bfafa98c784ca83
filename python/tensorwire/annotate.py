"""Framework annotations for `tensorwire capture`: pure Python, ctypes into the
capture shim that the capture preloads. Outside a capture every call is a no-op.

    import tensorwire.annotate as twa

    twa.ddp_buckets(ddp)                  # after DDP(model): bucket ready / reduced
    with twa.iteration(i):                # iteration boundaries
        with twa.forward(): ...           # and compute spans: forward(), backward(),
        ...                               # optimizer(), span("name"); mark("name") for instants

(examples/ddp/train.py --annotate uses all of them.)
`tensorwire capture` puts this package on PYTHONPATH. Each call writes one
64-byte event into the process's trace (docs/trace-format.md, kind 9), on the same
clock as the socket calls, so `tensorwire trace show` can name the messages a
bucket's all-reduce sent and split iterations into compute and communication.
"""
import contextlib
import ctypes

ITERATION, FORWARD, BACKWARD, OPTIMIZER, BUCKET, SPAN = 1, 2, 3, 4, 5, 6

_annotate = None
try:
    _self = ctypes.CDLL(None)  # the process's global symbols: the preloaded shim's among them
    if _self.tensorwire_capturing():
        _annotate = _self.tensorwire_annotate
        _annotate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_uint, ctypes.c_char_p]
        _annotate.restype = None
except (AttributeError, OSError):
    _annotate = None


def enabled():
    """True when the job runs under `tensorwire capture`."""
    return _annotate is not None


def _emit(kind, phase, value=0, aux=0, name=""):
    if _annotate is not None:
        _annotate(kind, ord(phase), int(value), int(aux) & 0xFFFFFFFF, name.encode()[:31])


@contextlib.contextmanager
def _spanning(kind, name, value=0):
    _emit(kind, "B", value, 0, name)
    try:
        yield
    finally:
        _emit(kind, "E", value, 0, name)


def iteration(n):
    """The iteration numbered `n`, as a `with` block."""
    return _spanning(ITERATION, "iteration", n)


def forward():
    return _spanning(FORWARD, "forward")


def backward():
    return _spanning(BACKWARD, "backward")


def optimizer():
    return _spanning(OPTIMIZER, "optimizer")


def span(name, value=0):
    """Any other named span (names are cut at 31 bytes)."""
    return _spanning(SPAN, name, value)


def mark(name, value=0):
    """An instant."""
    _emit(SPAN, "I", value, 0, name)


def ddp_buckets(ddp, model=None, process_group=None):
    """Registers a DDP communication hook that all-reduces as DDP's default does and
    marks each gradient bucket: begin when it is ready (its all-reduce starts), end
    when it is reduced; the bucket's index, its bytes and its first parameter's name.
    Call it once, before the first backward pass. Returns whether it registered."""
    if not enabled():
        return False
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    names = {}
    for n, p in (model or ddp.module).named_parameters():
        names[id(p)] = n

    def hook(state, bucket):
        buf = bucket.buffer()
        nbytes = buf.numel() * buf.element_size()
        index = bucket.index()
        params = bucket.parameters()
        label = names.get(id(params[0]), "?") if params else "?"
        if len(params) > 1:
            label = f"{label}+{len(params) - 1}"
        _emit(BUCKET, "B", nbytes, index, label)

        def reduced(fut):
            _emit(BUCKET, "E", nbytes, index, label)
            return fut.value()

        return default_hooks.allreduce_hook(state, bucket).then(reduced)

    ddp.register_comm_hook(process_group, hook)
    return True
