"""`python -m bench` (`make bench`, docs/performance.md): figures 1-4 (admission, HTTP, latency,
growth) and 5-6 (engine capacity and throughput beside DBOS), 7 (admission through PgBouncer vs
direct), 8 (per-key admission, fairness and plans), 9 (named limit + rate admission,
rate-promotion lateness), 10 (step-scope limits: throughput vs the ideal and vs an
execution-scope limit, hand-off p99), 11 (operating the queues: pruning under load, pause,
bulk replay, delayed runs, the database over a simulated day), 12 (another team's start under
one team's fan-outs, beside figure 5), 13 (a step claim with 100 / 10k / 100k pending),
printed, and written to bench/RESULTS.md when every figure ran. A figure that cannot run is a
FAILED row and a non-zero exit."""

from __future__ import annotations

import argparse
import sys
import time


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short rounds: under two minutes")
    parser.add_argument("--seconds", type=int, help="length of one round (default 3, quick 1)")
    parser.add_argument("--rounds", type=int, help="rounds per figure, median taken (default 3)")
    parser.add_argument("--clients", default="1,4,16", help="client counts of figure 1")
    parser.add_argument(
        "--kinds",
        default="open,limited",
        help="figure 1 workflows: open (no limit) and/or limited (most admissions queue)",
    )
    parser.add_argument("--finished", type=int, help="finished rows of figure 8 (default 1e6)")
    parser.add_argument(
        "--grown", type=int, help="finished rows of figure 4 (default 1e7, quick 1e5)"
    )
    parser.add_argument("--samples", type=int, help="latency samples of figure 3 (default 200)")
    parser.add_argument(
        "--http-workers", type=int, help="gunicorn workers of figure 2 (default: server.workers)"
    )
    parser.add_argument(
        "--only",
        default="1,2,3,4,5,6,7,8,9,10,11,12,13",
        help="figures to run, e.g. --only 1,4 (5 and 6 run together)",
    )
    parser.add_argument(
        "--ops-sizes",
        default="1000000,10000,10000,5000",
        help="figure 11: finished rows pruned, bulk replays, delayed runs, executions per "
        "simulated hour",
    )
    parser.add_argument(
        "--embedded", action="store_true", help="use the embedded PostgreSQL under .mantle/"
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="with --only: replace those figures' rows and notes in bench/RESULTS.md",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="do not write bench/RESULTS.md (a run of some figures, --only, never writes it)",
    )
    return parser


def main(argv: list[str]) -> None:
    options = _parser().parse_args(argv)
    quick = options.quick
    seconds = options.seconds or (1 if quick else 3)
    rounds = options.rounds or 3
    finished = options.finished if options.finished is not None else 100_000 if quick else 1_000_000
    grown = options.grown if options.grown is not None else 100_000 if quick else 10_000_000
    samples = options.samples or (50 if quick else 200)
    clients = [int(c) for c in options.clients.split(",")]
    kinds = options.kinds.split(",")
    if quick and options.clients == "1,4,16":
        clients = [1, 16]
    if quick and options.kinds == "open,limited":
        kinds = ["open"]
    only = {int(f) for f in options.only.split(",")}

    from bench import database

    started = time.monotonic()
    url, label = database.prepare(embedded=options.embedded)
    print(f"database: {label}, {url}", flush=True)

    from bench import (
        admission,
        backlog,
        crowded,
        engine,
        fixtures,
        growth,
        http,
        keys,
        keys_scale,
        machine,
        ops,
        pooled,
        promotion,
        report,
        shared,
        steplimits,
    )

    results = report.Report()
    # The 100 teams first: every team, workflow and version id of the hot team is then far from
    # the lock namespaces (see bench.pgbench), whatever order the database saw before.
    many = {kind: fixtures.fleet("bench-many", 100, kind) for kind in kinds}
    hot = {kind: fixtures.fleet("bench-hot", 1, kind) for kind in (*kinds, "open")}
    print("| " + " | ".join(report.HEADER) + " |", flush=True)

    def figure_1() -> None:
        fleets = {}
        for kind in kinds:
            fleets[f"hot team, {kind}"] = hot[kind]
            fleets[f"100 teams, {kind}"] = many[kind]
        admission.run(
            results, url=url, fleets=fleets, clients=clients, seconds=seconds, rounds=rounds
        )

    def figure_2() -> None:
        http.run(
            results,
            hot=hot["open"],
            seconds=max(seconds, 2),
            rounds=rounds,
            workers=options.http_workers,
        )

    def figure_3() -> None:
        chain = fixtures.fleet("bench-chain", 1, "chain")[0]
        promotion.run(results, chain=chain, samples=samples, cluster=True)

    def figure_4() -> None:
        backlog = fixtures.fleet("bench-backlog", 1, "limited")[0]
        growth.run(
            results,
            hot=hot["open"],
            backlog=backlog,
            finished=grown,
            clients=16,
            seconds=seconds,
            rounds=rounds,
            samples=samples,
        )

    def figures_5_and_6() -> None:
        sizes = engine.Sizes(noops=300, burst=100) if quick else engine.Sizes()
        engine.run(results, sizes=sizes)

    def figure_7() -> None:
        pooled.run(results, hot=hot["open"], clients=[16, 64], seconds=seconds, rounds=rounds)

    def figure_8() -> None:
        keys.run(
            results,
            hot=hot["open"][0],
            clients=16,
            seconds=seconds,
            rounds=rounds,
            finished=finished,
        )
        keys_scale.run(
            results,
            fair=keys.fair_target(),
            finished=finished,
            seconds=max(seconds, 2) * 5,
            rounds=rounds,
        )

    def figure_9() -> None:
        references = {kind: fixtures.fleet("bench-hot", 1, kind)[0] for kind in ("limited", "open")}
        shared.run(results, references=references, clients=16, seconds=seconds, rounds=rounds)

    def figure_10() -> None:
        steplimits.run(results)

    def figure_11() -> None:
        finished_rows, replays, delayed, per_hour = (int(n) for n in options.ops_sizes.split(","))
        sizes = ops.Sizes(
            finished=finished_rows, replays=replays, delayed=delayed, day_per_hour=per_hour
        )
        ops.run(results, hot=hot["open"], sizes=sizes)

    def figure_12() -> None:
        crowded.run(results)

    def figure_13() -> None:
        backlog.run(results)

    figures = {
        1: figure_1,
        2: figure_2,
        3: figure_3,
        4: figure_4,
        5: figures_5_and_6,
        7: figure_7,
        8: figure_8,
        9: figure_9,
        10: figure_10,
        11: figure_11,
        12: figure_12,
        13: figure_13,
    }
    only |= {5} if 6 in only else set()
    for number, figure in figures.items():
        if number in only:
            try:
                figure()
            except Exception as error:
                results.fail("5 and 6" if number == 5 else str(number), error)
                database.truncate_executions()
    settings = (
        f"{seconds} s rounds, {rounds} rounds, clients {clients}, {grown:,} finished rows"
        f" (figure 4; {finished:,} in figure 8), "
        f"{samples} latency samples; {time.monotonic() - started:.0f} s in all"
    )
    print()
    print(report.table(results.rows))
    for note in results.notes:
        print(f"note: {note}")
    if options.update and not options.no_write:
        report.update(results, figures=only | ({6} if 5 in only else set()), settings=settings)
        print(f"{sorted(only)} updated in {report.RESULTS}")
    elif options.no_write or not set(figures) <= only:
        # A run of some figures (--only) would replace the full run's table with a part of it.
        print(f"{report.RESULTS} not written (--no-write, or not every figure ran)")
    else:
        report.write(results, machine=machine.describe(server_label=label), settings=settings)
        print(f"written to {report.RESULTS}")
    for failure in results.failed:
        print(failure, file=sys.stderr)
    if results.failed:
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
