"""`opscan scan`: run targets forward and backward in strict deterministic mode and list every op that raises.

Importing this module imports no torch; `run` does.
"""

from __future__ import annotations

import argparse
import sys

from opscan.output import FORMATS

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

NO_GPU = (
    "opscan: no CUDA GPU found; scanning on the CPU. On the CPU only put_ and max_unpool raise the "
    "determinism alert, so this is a partial scan: run it on a GPU machine for the full list."
)


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in text.replace("x", ",").split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 2,3,224,224") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 2,3,224,224")
    return dims


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="FILE.py:CALLABLE or MODULE:CALLABLE returning (model, inputs[, loss_fn]); "
        "torchvision:NAME, timm:NAME or hf:MODEL_TYPE[,key=value...] (random init)",
    )
    parser.add_argument(
        "--run",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT ARGS",
        help="run an unmodified training script under the tracer (put opscan's own options before --run)",
    )
    parser.add_argument(
        "--max-steps", type=_positive, default=1, metavar="N", help="with --run: stop after N optimizer steps (default 1)"
    )
    parser.add_argument("--input-shape", type=_shape, metavar="SHAPE", help="input shape for zoo targets, e.g. 2,3,224,224")
    parser.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default: cuda if available)")
    parser.add_argument(
        "--output-format", choices=[f for f in FORMATS], default="text", help="report format (default text)"
    )
    parser.add_argument("-o", "--output-file", metavar="FILE", help="write the report here (atomically) instead of stdout")


def run(args: argparse.Namespace) -> int:
    from opscan.output import write as write_output
    from opscan.findings import Report
    from opscan.output import render

    if not args.targets and not args.run:
        print("opscan: error: give a TARGET or --run SCRIPT (see opscan scan --help)", file=sys.stderr)
        return EXIT_ERROR
    if args.run is not None and not args.run:
        print("opscan: error: --run needs a script path", file=sys.stderr)
        return EXIT_ERROR
    try:
        import torch  # noqa: F401
    except ImportError:
        print("opscan: error: opscan scan needs torch; install opscan[trace]", file=sys.stderr)
        return EXIT_ERROR

    device = _device(args.device)
    if device is None:
        return EXIT_ERROR
    report = Report(command="scan")
    flags, cublas_alerted = None, False
    for target, work in _plan(args):
        result = _scan_one(target, work, device, report, args)
        if result is not None:
            flags = result.flags_seen or flags
            cublas_alerted = cublas_alerted or result.cublas_alerted

    from opscan.trace.tracer import collect_env

    try:
        report.env = collect_env(device, flags, cublas_alerted)
    except Exception as exc:  # noqa: BLE001 - a broken CUDA context must not cost the findings
        report.errors.append({"message": f"could not read the environment: {exc}"})
    report.env["targets"] = len(args.targets) + (1 if args.run else 0)
    try:
        write_output(render(report, args.output_format), args.output_file)
    except OSError as exc:
        print(f"opscan: error: cannot write {args.output_file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.output_format != "text" or args.output_file:  # the text report on stdout lists them already
        for notice in report.notices:
            print(f"opscan: {notice}", file=sys.stderr)
    if report.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if report.findings else EXIT_CLEAN


def _device(requested: str) -> str | None:
    import torch

    if requested == "auto":
        if torch.cuda.is_available():
            return "cuda"
        print(NO_GPU, file=sys.stderr)
        return "cpu"
    try:
        device = torch.device(requested)
    except RuntimeError:
        print(f"opscan: error: {requested!r} is not a device; use cuda, cuda:N, cpu or auto", file=sys.stderr)
        return None
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"opscan: error: --device {requested} asked for, but no CUDA GPU is available", file=sys.stderr)
        return None
    if device.type == "cpu":
        print(NO_GPU.replace("no CUDA GPU found; scanning", "scanning"), file=sys.stderr)
    return str(device)


def _plan(args):
    for target in args.targets:
        yield target, ("target", target)
    if args.run:
        yield args.run[0], ("script", args.run[0], args.run[1:])


def _scan_one(name, work, device, report, args):
    """Scan one target into `report`; returns its Trace, or None if it never ran."""
    from opscan.trace import trace
    from opscan.trace.targets import (
        TargetError,
        UserCodeError,
        load_target,
        run_script,
        run_workload,
        stdout_to_stderr,
    )

    t = None
    try:
        if work[0] == "target":
            with stdout_to_stderr():  # whatever the user's code prints must not mix with the report
                workload = load_target(work[1], input_shape=args.input_shape)
                workload = workload.to(device)
                with trace(name, roots=(workload.model,)) as t:
                    notices = run_workload(workload)
            report.notices.extend(f"{name}: {n}" for n in notices)
        else:
            with trace(name) as t:
                outcome = run_script(work[1], work[2], max_steps=args.max_steps)
            if outcome.stopped:
                report.notices.append(f"{name}: stopped after {outcome.steps} optimizer step(s)")
            else:
                report.notices.append(f"{name}: the script ended after {outcome.steps} optimizer step(s)")
    except TargetError as exc:
        print(f"opscan: error: {exc}", file=sys.stderr)
        report.errors.append({"target": name, "message": str(exc)})
    except UserCodeError as exc:
        print(f"opscan: error: {exc.during}; its traceback:\n{exc.format_traceback()}", file=sys.stderr, end="")
        report.errors.append({"target": name, "message": str(exc)})
    except Exception as exc:  # noqa: BLE001 - the model's own error, whatever it is

        from opscan.trace.targets import format_user_traceback

        print(f"opscan: error: {name} raised while scanning; its traceback:\n{format_user_traceback(exc)}", file=sys.stderr, end="")
        report.errors.append({"target": name, "message": f"{type(exc).__name__}: {exc}"})
    if t is not None:
        report.findings.extend(t.findings)
        report.notices.extend(f"{name}: {n}" for n in t.notices)
        report.errors.extend(t.errors)
    return t
