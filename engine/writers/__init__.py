"""Model writers: ncnn (``.ncnn.param``/``.ncnn.bin``), pnnx (``.pnnx.param``/``.pnnx.bin``), the
Python scripts pnnx writes beside them (``<stem>_pnnx.py``, ``<stem>_ncnn.py``), the readers tests
and the verify feature use, and atomic writing of file groups.

Public API: :func:`write_ncnn`, :func:`write_pnnx`, :func:`write_pnnx_py`, :func:`write_ncnn_py`,
:func:`read_ncnn_param`, :func:`read_pnnx`,
:func:`check_ncnn` (the problems that stop a graph from being written, e.g. for a user-edited
param file), :func:`atomic_files`, :func:`atomic_transaction`, :func:`durable_writes`.
"""
from .atomic import atomic_files, atomic_transaction, durable_writes
from .ncnn_check import check_graph as check_ncnn
from .ncnn_py import write_ncnn_py
from .ncnn_reader import read_ncnn_param
from .ncnn_writer import NcnnWriteResult, write_ncnn
from .pnnx_reader import read_pnnx
from .pnnx_py import write_pnnx_py
from .pnnx_writer import write_pnnx

__all__ = ["NcnnWriteResult", "atomic_files", "atomic_transaction", "check_ncnn", "durable_writes", "read_ncnn_param",
           "read_pnnx", "write_ncnn", "write_ncnn_py", "write_pnnx", "write_pnnx_py"]
