"""The ``pdlab`` command (mirrors the role of ``vllm/entrypoints/cli``).

Subcommands: ``doctor`` (what works here). Bad options exit with code 2 and a message.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pdlab", description=(
        "Run the prefill/decode path of an LLM inference engine: paged KV cache, vLLM-v1 "
        "scheduler, MLA kernels, P/D disaggregation."))
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("doctor", help="check what works on this machine")
    d.add_argument("--aot", action="store_true",
                   help="also compile every Triton kernel for sm_80 and sm_90")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "doctor":
        from pdlab import doctor
        return doctor.main(aot=args.aot)
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
