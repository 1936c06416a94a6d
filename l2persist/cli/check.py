"""`check`: is any persisting-L2 set-aside in force for this process? The verdicts are
l2persist.state's; this is the command around them."""

from __future__ import annotations

from .. import _core
from ._common import Parser, device_problem, fail, prog


def main(argv: list[str] | None = None) -> int:
    """Exit 1 with one line per device whose set-aside is neither 0 nor the default, 0 with
    one line otherwise (also without a GPU); 2 on a usage error (one line)."""
    try:  # imported here: the report and the studies work without it
        from ..state import PERCENT_VAR, verdict
    except ModuleNotFoundError as e:
        if e.name != "l2persist.state":
            raise
        return fail(f"{prog()} check", "this l2persist has no state checker "
                                       "(l2persist.state is missing)")
    p = Parser(prog=f"{prog()} check",
               description="Is any persisting-L2 set-aside in force for this process? (A "
                           "set-aside belongs to the CUDA context that sets it: a fresh "
                           "process sees its own context, the MPS server and "
                           f"{PERCENT_VAR}, never another process's limit.)")
    p.add_argument("--device", type=int, default=None, help="check only this GPU")
    args = p.parse_args(argv)
    count = _core.device_count()
    problem = device_problem(args.device, count)
    if problem:  # one line, as every usage error of the CLI; returned, as check_main's
        return fail(p.prog, problem)
    if count == 0:
        why = _core.no_device_reason()
        print(f"no GPU: nothing sets aside L2 here ({why[1] if why else 'no device'})")
        return 0
    clean = True
    for i in [args.device] if args.device is not None else range(count):
        try:
            ok, line = verdict(_core.Device(i))
        except ValueError as e:
            return fail(p.prog, f"device: {e}")
        clean &= ok
        print(line)
    return 0 if clean else 1
