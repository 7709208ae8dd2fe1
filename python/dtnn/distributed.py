"""The process's place in a data-parallel job.

`mpirun -np 4 python3 train.py` needs no change to the script: the first call that needs a
communicator (any of these, or a Model being built) initialises MPI through libdtnn, which
joins the job when an MPI launcher (mpirun, mpiexec, srun) started the process, and is a
single process otherwise. When mpi4py initialised MPI first, libdtnn uses the MPI it finds
initialised and leaves its finalisation to mpi4py.
"""
import atexit

from ._lib import ffi, lib, new_error, raise_error, text

_state = {"comm": None}


def _release():
    comm = _state["comm"]
    _state["comm"] = None
    if comm is not None:
        lib.dtnn_comm_free(comm)


def communicator():
    """The process's libdtnn communicator (a cffi pointer), created on first use."""
    if _state["comm"] is None:
        err = new_error()
        comm = lib.dtnn_comm_create_auto(ffi.NULL, ffi.NULL, err)
        if comm == ffi.NULL:
            raise_error(err, "starting the communicator")
        _state["comm"] = comm
        atexit.register(_release)
    return _state["comm"]


def init(comm=None):
    """Starts the communicator now (rather than on first use). comm: an mpi4py communicator
    the script already has; dtnn trains over all of MPI_COMM_WORLD's ranks, so it must span
    them (a sub-communicator is refused, naming its size)."""
    c = communicator()
    if comm is not None:
        theirs = (comm.Get_rank(), comm.Get_size())
        ours = (lib.dtnn_comm_rank(c), lib.dtnn_comm_size(c))
        if theirs != ours:
            raise ValueError(
                f"dtnn trains over all {ours[1]} ranks of MPI_COMM_WORLD; the communicator "
                f"given is rank {theirs[0]} of {theirs[1]} (a sub-communicator, or a "
                "reordered one): pass MPI.COMM_WORLD or none")
    return c


def rank():
    """This process's rank (0 in a single process)."""
    return lib.dtnn_comm_rank(communicator())


def size():
    """The number of ranks training together (1 in a single process)."""
    return lib.dtnn_comm_size(communicator())


def is_main():
    """Whether this is rank 0, the one that writes logs and checkpoints."""
    return rank() == 0


def cores():
    """The cores this process may use (its CPU affinity, shared among the node's ranks)."""
    return lib.dtnn_comm_cores(communicator())


def name():
    """The communicator's description: "single process", "Open MPI v4.1.4", ..."""
    return text(lib.dtnn_comm_name(communicator()))
